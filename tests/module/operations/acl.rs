//! The README's ACL recipes, as written: read from the README, run on the
//! server under test, then used as the README's own examples use them
//! (their keys, the twin's functions, the client packages' engine
//! detection).

use crate::twin;

use crate::support::*;

fn readme() -> String {
    std::fs::read_to_string(concat!(root!(), "/README.md")).unwrap()
}

/// The README's `ACL SETUSER app ...` line that contains `marker`.
fn recipe(marker: &str) -> String {
    let lines: Vec<String> = readme()
        .lines()
        .filter(|l| l.starts_with("ACL SETUSER app ") && l.contains(marker))
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), 1, "README recipes with {marker:?}: {lines:?}");
    lines[0].clone()
}

/// Whether modules can add ACL categories here (Redis 7.4+, Valkey 8+).
fn has_module_acl_categories() -> bool {
    let v = server_version();
    (v.valkey && v.major >= 8) || v.has_redis(7, 4)
}

/// The module recipe for this server.
fn module_recipe() -> String {
    if has_module_acl_categories() {
        recipe("+@ratelimit")
    } else {
        recipe("+cl.throttle")
    }
}

/// Runs an `ACL SETUSER` line as the administrator, then connects as `app`.
fn as_app(s: &Server, setuser: &str) -> redis::Connection {
    let words: Vec<&[u8]> = setuser.split_whitespace().map(str::as_bytes).collect();
    run(&mut s.conn(), &words).unwrap_or_else(|e| panic!("{setuser}: {e}"));
    let mut c = s.user_conn();
    cmd(&mut c, "AUTH app secret").unwrap();
    c
}

/// The keys of the README's client examples (Python f-strings such as
/// `f"{{rl:{user}}}:sec"`), for the user `alice` and the API `github`.
fn readme_keys() -> Vec<String> {
    let text = readme();
    let mut keys = Vec::new();
    for (i, _) in text.match_indices("f\"") {
        let rest = &text[i + 2..];
        let Some(end) = rest.find('"') else { continue };
        let template = &rest[..end];
        if !(template.starts_with("rl:") || template.starts_with("{{rl:")) {
            continue;
        }
        let key = f_string(template, &[("user", "alice"), ("api", "github")]);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
}

/// A Python f-string's text with its fields replaced: `{{` and `}}` are
/// braces, `{name}` a field.
fn f_string(template: &str, fields: &[(&str, &str)]) -> String {
    let mut out = String::new();
    let mut chars = template.chars().peekable();
    while let Some(ch) = chars.next() {
        match (ch, chars.peek()) {
            ('{', Some('{')) | ('}', Some('}')) => {
                out.push(ch);
                chars.next();
            }
            ('{', _) => {
                let name: String = chars.by_ref().take_while(|&c| c != '}').collect();
                let value = fields.iter().find(|(n, _)| *n == name);
                out.push_str(value.unwrap_or_else(|| panic!("no value for {{{name}}}")).1);
            }
            _ => out.push(ch),
        }
    }
    out
}

#[test]
fn the_app_recipe_takes_the_readmes_own_keys() {
    let keys = readme_keys();
    assert!(
        keys.iter().any(|k| k.starts_with("rl:")) && keys.iter().any(|k| k.starts_with("{rl:")),
        "the README's client examples name keys with and without a hash tag: {keys:?}"
    );
    let s = Server::start();
    let c = &mut as_app(&s, &module_recipe());
    for key in &keys {
        let reply = cmd(c, &format!("CL.THROTTLE {key} 15 15 60 1"));
        assert!(reply.is_ok(), "{key}: {reply:?}");
    }
    // The README's two-limit call, on its hash-tagged pair.
    let tagged: Vec<&String> = keys.iter().filter(|k| k.starts_with("{rl:")).collect();
    assert!(tagged.len() >= 2, "{tagged:?}");
    let reply = cmd(
        c,
        &format!(
            "CL.THROTTLEALL 2 {} {} GCRA 4 5 1 FW 8 86400 ALIGN MS",
            tagged[0], tagged[1]
        ),
    );
    assert!(reply.is_ok(), "{reply:?}");
    // Keys outside the patterns are refused, and so was the hash-tagged
    // key under the old recipe's single pattern.
    let e = err(c, "CL.THROTTLE user123 15 30 60 1");
    assert!(e.starts_with("NOPERM"), "{e}");
    let narrow = module_recipe().replace(" ~{rl:*", "");
    let old = Server::start();
    let c = &mut as_app(&old, &narrow);
    let e = err(c, &format!("CL.THROTTLE {} 15 15 60 1", tagged[0]));
    assert!(e.starts_with("NOPERM"), "{e}");
}

#[test]
fn engine_detection_needs_command_info_or_the_engine_given() {
    let s = Server::start();
    let c = &mut as_app(&s, &module_recipe());
    let e = err(c, "COMMAND INFO CL.THROTTLE");
    assert!(e.starts_with("NOPERM"), "{e}");
    let c = &mut as_app(&s, &format!("{} +command|info", module_recipe()));
    let info = cmd(c, "COMMAND INFO CL.THROTTLE").unwrap();
    assert_ne!(info, Value::Array(vec![Value::Nil]));
    assert!(format!("{info:?}").contains("cl.throttle"), "{info:?}");
    // The grant is that subcommand only.
    assert!(
        err(c, "COMMAND DOCS CL.THROTTLE").starts_with("NOPERM") || !server_version().has_7_0()
    );
}

/// One call of each function the twin has, on keys the recipes grant, as
/// `(function, keys, arguments)`; in this order each finds the state the
/// one before it left (a live counter, a held lease).
const FUNCTION_CALLS: &[(&str, &[&str], &str)] = &[
    ("cl_throttle", &["rl:cl"], "15 30 60 1"),
    ("cl_peek", &["rl:cl"], "15 30 60"),
    ("cl_reserve", &["rl:res"], "0 100 1 MAXWAIT 1 MS"),
    ("cl_reserve", &["rl:res"], "0 100 1 MAXWAIT 1 MS"),
    ("cl_refund", &["rl:cl"], "15 30 60 1"),
    (
        "cl_throttleall",
        &["{rl:alice}:sec", "{rl:alice}:day"],
        "GCRA 19 10 1 FW 10000 day",
    ),
    ("sw_allow", &["rl:sw"], "5 15m"),
    ("sw_allow", &["rl:sw"], "5 15m"),
    ("sw_peek", &["rl:sw"], "5 15m"),
    ("sw_refund", &["rl:sw"], "5 15m 1"),
    ("fw_incr", &["rl:fw"], "10 60"),
    ("fw_incr", &["rl:fw"], "10 60"),
    ("fw_peek", &["rl:fw"], "10 60"),
    ("fw_refund", &["rl:fw"], "10 60 1"),
    ("cc_acquire", &["rl:cc"], "3 30s ID worker-1"),
    ("cc_renew", &["rl:cc"], "worker-1 30s"),
    ("cc_peek", &["rl:cc"], "3"),
    ("cc_release", &["rl:cc"], "worker-1"),
];

/// The twin's call of `function`, as this server runs it: `FCALL` (or
/// `FCALL_RO` for the peeks), or `EVALSHA` on Redis 6.2.
fn twin_call(sha: &Option<String>, function: &str, keys: &[&str], args: &str) -> redis::Cmd {
    let mut c = match sha {
        None => {
            let read_only = function.ends_with("_peek");
            let mut c = redis::cmd(if read_only { "FCALL_RO" } else { "FCALL" });
            c.arg(function);
            c
        }
        Some(sha) => {
            let mut c = redis::cmd("EVALSHA");
            c.arg(sha);
            c
        }
    };
    c.arg(keys.len()).arg(keys);
    if sha.is_some() {
        c.arg(function.replace('_', "."));
    }
    for a in args.split_whitespace() {
        c.arg(a);
    }
    c
}

#[test]
fn the_functions_recipe_runs_every_function() {
    // A server without the module, as a managed service is.
    let s = Server::with(Options {
        without_module: true,
        ..Options::default()
    });
    let admin = &mut s.conn();
    let (setuser, sha) = match twin::Twin::load(admin) {
        twin::Twin::Functions => (recipe("+fcall "), None),
        twin::Twin::Eval { sha } => (recipe("+evalsha "), Some(sha)),
    };
    // Only the call itself granted: the first command the twin calls is
    // refused inside it.
    let call = if sha.is_none() {
        "+fcall +fcall_ro"
    } else {
        "+evalsha +eval"
    };
    let bare = &mut as_app(
        &s,
        &format!("ACL SETUSER app on >secret ~rl:* ~{{rl:* resetchannels -@all {call}"),
    );
    let e = twin_call(&sha, "cl_throttle", &["rl:x"], "15 30 60 1")
        .query::<Value>(bare)
        .map_err(error_text)
        .unwrap_err();
    let v = server_version();
    // Redis 8 and Valkey name the command; Redis 6.2 and 7.0 do not.
    if v.valkey || v.major >= 8 {
        assert!(
            e.starts_with(
                "ERR ACL failure in script: User app has no permissions to run the 'time' command"
            ),
            "{e}"
        );
    } else {
        // Redis 6.2 and 7.0 do not name the command.
        assert!(
            e.contains("The user executing the script can't run this command or subcommand"),
            "{e}"
        );
    }
    cmd(admin, "ACL DELUSER app").unwrap();
    let c = &mut as_app(&s, &setuser);
    for (function, keys, args) in FUNCTION_CALLS {
        let reply = twin_call(&sha, function, keys, args)
            .query::<Value>(c)
            .map_err(error_text);
        assert!(reply.is_ok(), "{function} {keys:?} {args}: {reply:?}");
    }
    // Every function of the library was called.
    if sha.is_none() {
        let listed = format!(
            "{:?}",
            cmd(admin, "FUNCTION LIST LIBRARYNAME redis_cell").unwrap()
        );
        let called: std::collections::BTreeSet<&str> =
            FUNCTION_CALLS.iter().map(|(f, _, _)| *f).collect();
        for name in listed
            .split('"')
            .filter(|w| w.contains('_') && !w.contains(' '))
        {
            if name.starts_with("cl_")
                || name.starts_with("sw_")
                || name.starts_with("fw_")
                || name.starts_with("cc_")
            {
                assert!(called.contains(name), "{name} not called");
            }
        }
        // The detection's grant: FUNCTION LIST, that subcommand only.
        let e = err(c, "FUNCTION LIST LIBRARYNAME redis_cell");
        assert!(e.starts_with("NOPERM"), "{e}");
        let c = &mut as_app(&s, &format!("{setuser} +function|list"));
        let libraries = cmd(c, "FUNCTION LIST LIBRARYNAME redis_cell").unwrap();
        assert!(
            format!("{libraries:?}").contains("redis_cell"),
            "{libraries:?}"
        );
        assert!(err(c, "FUNCTION DELETE redis_cell").starts_with("NOPERM"));
    }
    // Keys outside the patterns are refused inside the functions too.
    let e = twin_call(&sha, "cl_throttle", &["user123"], "15 30 60 1")
        .query::<Value>(c)
        .map_err(error_text)
        .unwrap_err();
    assert!(e.starts_with("NOPERM"), "{e}");
}

/// The examples run as the README's app user when told the engine
/// (`REDIS_CELL_ENGINE`): that user may not call `COMMAND`.
#[test]
fn the_examples_run_as_the_app_user_given_the_engine() {
    let s = Server::start();
    drop(as_app(&s, &module_recipe()));
    let url = format!("redis://app:secret@127.0.0.1:{}", s.port);
    let root = root!();
    let python = std::process::Command::new("python3")
        .arg(format!("{root}/examples/python_headers.py"))
        .args(["erin", "headers"])
        .env("REDIS_URL", &url)
        .env("REDIS_CELL_ENGINE", "module")
        .env(
            "PYTHONPATH",
            format!("{root}/target/deps/python:{root}/target/deps/python-cell"),
        )
        .output()
        .expect("python3 runs the Python example");
    let node = std::process::Command::new("node")
        .arg(format!("{root}/examples/node_headers.mjs"))
        .arg("fay")
        .env("REDIS_URL", &url)
        .env("REDIS_CELL_ENGINE", "module")
        .output()
        .expect("node runs the Node.js example");
    for (what, out) in [("python", python), ("node", node)] {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{what} example as the app user: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.lines().next().is_some_and(|l| l.starts_with("200 ")),
            "{what}: {stdout}"
        );
        assert!(
            stdout.lines().last().is_some_and(|l| l.starts_with("429 ")),
            "{what}: {stdout}"
        );
    }
}

/// The public commands, which the app recipes grant; anything else a README
/// session calls (`CL.POLICY`, `CL.TOP`) is the operator's.
const PUBLIC: &[&str] = &[
    "CL.THROTTLE",
    "CL.PEEK",
    "CL.THROTTLEALL",
    "CL.RESERVE",
    "CL.REFUND",
    "SW.ALLOW",
    "SW.PEEK",
    "SW.REFUND",
    "FW.INCR",
    "FW.PEEK",
    "FW.REFUND",
    "CC.ACQUIRE",
    "CC.RELEASE",
    "CC.RENEW",
    "CC.PEEK",
    "CL.LIMIT",
];

/// Every command the README shows typed (`> ...`, `$ redis-cli ...`), as
/// words, its comment cut off.
fn readme_calls() -> Vec<Vec<String>> {
    readme()
        .lines()
        .filter_map(|l| {
            l.strip_prefix("> ")
                .or_else(|| l.strip_prefix("$ redis-cli "))
        })
        .map(|l| l.split(" #").next().unwrap_or(l))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

fn refused_by_acl(e: &str) -> bool {
    e.starts_with("NOPERM")
        || e.contains("ACL failure")
        || e.contains("The user executing the script can't run this command")
}

/// Each call of the README, as its recipe's user: the module's calls as the
/// module recipe's, the twin's (`FCALL`) as the functions recipe's, each in
/// the README's order; the operator's commands as the administrator.
#[test]
fn every_call_of_the_readme_runs_as_the_recipes_user() {
    let calls = readme_calls();
    let (twin, module): (Vec<_>, Vec<_>) = calls
        .iter()
        .filter(|w| !w.is_empty())
        .partition(|w| w[0].to_uppercase().starts_with("FCALL"));
    assert!(module.len() >= 20 && twin.len() >= 5, "{module:?} {twin:?}");

    let s = Server::start();
    let admin = &mut s.conn();
    let app = &mut as_app(&s, &module_recipe());
    let mut public = 0;
    for words in &module {
        let is_public = PUBLIC.contains(&words[0].to_uppercase().as_str());
        let c: &mut redis::Connection = if is_public { app } else { admin };
        public += usize::from(is_public);
        let args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        if let Err(e) = run(c, &args) {
            assert!(!refused_by_acl(&e), "{words:?} as the app user: {e}");
        }
    }
    assert!(public >= 15, "{public} public calls in the README");

    let s = Server::with(Options {
        without_module: true,
        ..Options::default()
    });
    let (setuser, sha) = match twin::Twin::load(&mut s.conn()) {
        twin::Twin::Functions => (recipe("+fcall "), None),
        twin::Twin::Eval { sha } => (recipe("+evalsha "), Some(sha)),
    };
    let app = &mut as_app(&s, &setuser);
    for words in &twin {
        let n: usize = words[2]
            .parse()
            .unwrap_or_else(|_| panic!("{words:?}: numkeys"));
        let keys: Vec<&str> = words[3..3 + n].iter().map(String::as_str).collect();
        let args = words[3 + n..].join(" ");
        let reply = twin_call(&sha, &words[1], &keys, &args)
            .query::<Value>(app)
            .map_err(error_text);
        assert!(
            reply.is_ok(),
            "{words:?} as the functions recipe's user: {reply:?}"
        );
    }
}
