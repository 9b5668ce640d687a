//! What operators see and rely on: INFO counters, COMMAND DOCS, ACL
//! restrictions, and the commands inside MULTI, EVAL and functions.

use crate::support::*;

#[test]
fn info_counts_calls_allowed_limited_and_errors() {
    let s = Server::start();
    let c = &mut s.conn();
    for _ in 0..3 {
        five(c, "CL.THROTTLE i 1 1 10");
    }
    err(c, "CL.THROTTLE i -1 1 10");
    five(c, "SW.ALLOW s 1 10");
    five(c, "SW.ALLOW s 1 10");
    five(c, "FW.INCR f 5 10");
    five(c, "CL.PEEK i 1 1 10");
    cmd(c, "CL.THROTTLEALL 2 ta tb SW 1 10 FW 1 10").unwrap();
    cmd(c, "CL.THROTTLEALL 2 ta tb SW 1 10 FW 1 10").unwrap();
    cmd(c, "CL.THROTTLEALL 2 ta ta SW 1 10 FW 1 10").unwrap_err();
    let expect = [
        ("cl_throttle_calls", 4),
        ("cl_throttle_allowed", 2),
        ("cl_throttle_limited", 1),
        ("cl_throttle_errors", 1),
        ("sw_allow_calls", 2),
        ("sw_allow_allowed", 1),
        ("sw_allow_limited", 1),
        ("fw_incr_allowed", 1),
        ("cl_peek_calls", 1),
        ("sw_record_calls", 0),
        ("cl_throttleall_calls", 3),
        ("cl_throttleall_allowed", 1),
        ("cl_throttleall_limited", 1),
        ("cl_throttleall_errors", 1),
    ];
    for (field, want) in expect {
        assert_eq!(info_field(c, field), want, "{field}");
    }
}

const COMMANDS: &[&str] = &USER_COMMANDS;

/// The operators' commands: policies and top offenders.
const ADMIN: &[&str] = &["cl.policy", "cl.top"];

/// The internal commands that carry effects to replicas and the AOF.
const EFFECTS: &[&str] = &[
    "sw.record",
    "sw.unrecord",
    "sw.load",
    "cc.hold",
    "cc.drop",
    "cc.load",
];

/// The string after `field` in a COMMAND DOCS reply (a map in RESP3, a
/// flat list of names and values in RESP2).
fn doc_field(v: &Value, field: &str) -> Option<String> {
    match v {
        Value::Array(items) => items
            .windows(2)
            .find_map(|w| {
                (text(&w[0]).as_deref() == Some(field))
                    .then(|| text(&w[1]))
                    .flatten()
            })
            .or_else(|| items.iter().find_map(|i| doc_field(i, field))),
        Value::Map(pairs) => pairs.iter().find_map(|(k, v)| {
            if text(k).as_deref() == Some(field) {
                text(v)
            } else {
                doc_field(v, field)
            }
        }),
        _ => None,
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).to_string()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// The value of `key` in one level of a reply: a map in RESP3, a flat
/// list of names and values in RESP2.
fn entry<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    match v {
        Value::Array(items) => items.chunks(2).find_map(|pair| match pair {
            [k, v] if text(k).as_deref() == Some(key) => Some(v),
            _ => None,
        }),
        Value::Map(pairs) => pairs
            .iter()
            .find_map(|(k, v)| (text(k).as_deref() == Some(key)).then_some(v)),
        _ => None,
    }
}

fn items(v: Option<&Value>) -> Vec<Value> {
    match v {
        Some(Value::Array(items)) | Some(Value::Set(items)) => items.clone(),
        _ => Vec::new(),
    }
}

/// One argument of COMMAND DOCS written as redis.io writes syntax:
/// `[optional]`, `<one | of>`, blocks in sequence, `TOKEN value`, and
/// `x [x ...]` for repeated ones.
fn syntax(arg: &Value) -> String {
    let field = |k: &str| entry(arg, k).and_then(text).unwrap_or_default();
    let flags: Vec<String> = items(entry(arg, "flags")).iter().filter_map(text).collect();
    let optional = flags.iter().any(|f| f == "optional");
    let token = entry(arg, "token").and_then(text);
    let subargs: Vec<String> = items(entry(arg, "arguments")).iter().map(syntax).collect();
    let (core, oneof) = match field("type").as_str() {
        "pure-token" => (token.unwrap_or_default(), false),
        "oneof" => (subargs.join(" | "), true),
        "block" => (
            token
                .into_iter()
                .chain(subargs)
                .collect::<Vec<_>>()
                .join(" "),
            false,
        ),
        _ => {
            // Redis 7.0 has no display_text: the name is shown.
            let name = entry(arg, "display_text")
                .or_else(|| entry(arg, "name"))
                .and_then(text)
                .unwrap_or_default();
            (token.map_or(name.clone(), |t| format!("{t} {name}")), false)
        }
    };
    let mut shown = if oneof && !optional {
        format!("<{core}>")
    } else {
        core
    };
    if flags.iter().any(|f| f == "multiple") {
        shown = format!("{shown} [{shown} ...]");
    }
    if optional {
        shown = format!("[{shown}]");
    }
    shown
}

/// The flags of a command's key specs in COMMAND INFO, e.g. `RO ACCESS`.
fn key_spec_flags(info: &Value) -> Vec<String> {
    let Value::Array(info) = info else {
        panic!("COMMAND INFO: {info:?}")
    };
    let Some(Value::Array(command)) = info.first() else {
        panic!("COMMAND INFO: {info:?}")
    };
    items(command.get(8))
        .iter()
        .map(|spec| {
            items(entry(spec, "flags"))
                .iter()
                .filter_map(text)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

#[test]
fn command_docs_for_every_command() {
    let s = Server::start();
    let c = &mut s.conn();
    let names = [COMMANDS, ADMIN, EFFECTS].concat();
    if server_version().has_7_0() {
        // Every command the module registers is in the list above.
        let mut registered: Vec<String> = redis::cmd("COMMAND")
            .arg(&["LIST", "FILTERBY", "MODULE", "redis-cell"])
            .query(c)
            .unwrap();
        registered.sort();
        // CL.POLICY's subcommands are commands of their own to the server.
        let subcommands: Vec<String> = registered
            .iter()
            .filter(|n| n.contains('|'))
            .cloned()
            .collect();
        assert_eq!(
            subcommands,
            [
                "cl.policy|del",
                "cl.policy|get",
                "cl.policy|help",
                "cl.policy|list",
                "cl.policy|promote",
                "cl.policy|set"
            ]
        );
        registered.retain(|n| !n.contains('|'));
        let mut listed: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        listed.sort();
        assert_eq!(registered, listed);
    }
    let mut missing = Vec::new();
    for name in names {
        let page = format!("{}/docs/commands/{name}.md", root!());
        assert!(std::path::Path::new(&page).is_file(), "no page {page}");
        if !server_version().has_7_0() {
            // Before 7.0 there is no COMMAND DOCS; COMMAND INFO knows the command.
            let info = cmd(c, &format!("COMMAND INFO {name}")).unwrap();
            assert!(format!("{info:?}").contains(name), "{name}: {info:?}");
            continue;
        }
        let reply = cmd(c, &format!("COMMAND DOCS {name}")).unwrap();
        let docs = format!("{reply:?}");
        for part in ["summary", "since", "arguments", "key"] {
            assert!(docs.contains(part), "{name}: {part} missing in {docs}");
        }
        // The command's page says the same as COMMAND DOCS.
        let page = std::fs::read_to_string(&page).unwrap();
        for field in ["summary", "complexity"] {
            let text = doc_field(&reply, field).unwrap_or_else(|| panic!("{name}: no {field}"));
            assert!(
                page.contains(&text),
                "{name}.md does not say its {field}: {text}"
            );
        }
        // Its syntax line is COMMAND DOCS's arguments, written out.
        let Value::Array(pair) = &reply else {
            panic!("{name}: {reply:?}")
        };
        let args = items(pair.get(1).and_then(|d| entry(d, "arguments")));
        let line = std::iter::once(name.to_uppercase())
            .chain(args.iter().map(syntax))
            .collect::<Vec<_>>()
            .join(" ");
        if !page.lines().any(|l| l == line) {
            missing.push(format!("{name}.md has no syntax line\n{line}"));
        }
        // And its key spec.
        let specs = key_spec_flags(&cmd(c, &format!("COMMAND INFO {name}")).unwrap());
        assert!(specs.len() <= 1, "{name}: {specs:?}");
        // Server configuration (policies, summaries) has no key.
        let said = match specs.first() {
            Some(spec) => format!("Key spec: `{spec}`"),
            None => "Key spec: none".to_string(),
        };
        if !page.contains(&said) {
            missing.push(format!("{name}.md does not say {said}"));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// Whether the server lets modules add ACL categories (Redis 7.4, every
/// Valkey since 8).
fn has_module_acl_categories() -> bool {
    let v = server_version();
    (v.valkey && v.major >= 8) || v.has_redis(7, 4)
}

/// The README's ACL recipe for an application's user, for this server.
fn acl_recipe() -> String {
    if has_module_acl_categories() {
        "ACL SETUSER app on >secret ~rl:* ~{rl:* resetchannels -@all +@ratelimit".to_string()
    } else {
        format!(
            "ACL SETUSER app on >secret ~rl:* ~{{rl:* resetchannels -@all {}",
            COMMANDS
                .iter()
                .map(|c| format!("+{c}"))
                .collect::<Vec<_>>()
                .join(" ")
        )
    }
}

/// One call of every public command, on keys under `rl:`.
const CALLS: &[&str] = &[
    "CL.THROTTLE rl:cl 5 1 60",
    "CL.PEEK rl:cl 5 1 60",
    "CL.THROTTLEALL 2 rl:a rl:b SW 5 60 FW 5 60",
    "CL.RESERVE rl:res 5 1 60 MAXWAIT 10",
    "CL.REFUND rl:cl 5 1 60 1",
    "SW.ALLOW rl:sw 5 60",
    "SW.PEEK rl:sw 5 60",
    "SW.REFUND rl:sw 5 60 1",
    "FW.INCR rl:fw 5 60",
    "FW.PEEK rl:fw 5 60",
    "FW.REFUND rl:fw 5 60 1",
    "CC.ACQUIRE rl:cc 3 30 ID a",
    "CC.RENEW rl:cc a 30",
    "CC.PEEK rl:cc 3",
    "CC.RELEASE rl:cc a",
    "CL.LIMIT rl:lim api",
];

/// One well-formed call of every replication-only command.
const EFFECT_CALLS: &[&str] = &[
    "SW.RECORD rl:e1 1000000000 1700000000000000000 1",
    "SW.UNRECORD rl:e1 1000000000 1700000000000000000 1",
    "SW.LOAD rl:e1 payload",
    "CC.HOLD rl:e2 a 1700000030000000000 1700000000000000000",
    "CC.DROP rl:e2 a 1700000000000000000",
    "CC.LOAD rl:e2 payload",
];

/// A connection authenticated as the user the README's recipe creates.
fn app_user(s: &Server) -> redis::Connection {
    cmd(&mut s.conn(), &acl_recipe()).unwrap();
    let mut c = s.user_conn();
    cmd(&mut c, "AUTH app secret").unwrap();
    c
}

#[test]
fn the_readme_acl_recipe_grants_every_public_command_and_no_effect() {
    let readme = std::fs::read_to_string(format!("{}/README.md", root!())).unwrap();
    let recipe = acl_recipe();
    assert!(readme.contains(&recipe), "README lacks {recipe}");
    let s = Server::start();
    cmd(&mut s.conn(), "CL.POLICY SET api GCRA 5 1 60").unwrap();
    let c = &mut app_user(&s);
    assert_eq!(CALLS.len(), COMMANDS.len());
    // An application neither changes nor reads the operators' policies.
    for line in ["CL.POLICY SET api GCRA 9 9 1", "CL.POLICY LIST", "CL.TOP"] {
        let e = err(c, line);
        assert!(e.starts_with("NOPERM"), "{line}: {e}");
    }
    for line in CALLS {
        assert!(cmd(c, line).is_ok(), "{line}: {:?}", cmd(c, line));
    }
    // The replication-only commands: unknown where they are internal,
    // refused by ACL elsewhere, never run.
    for line in EFFECT_CALLS {
        let name = line.split(' ').next().unwrap();
        let e = err(c, line);
        if server_version().has_internal_commands() {
            assert!(
                e.starts_with(&format!("ERR unknown command '{name}'")),
                "{line}: {e}"
            );
        } else {
            assert!(e.starts_with("NOPERM"), "{line}: {e}");
        }
    }
    for refused in [
        "CL.THROTTLE other 4 1 10",
        "SW.ALLOW other 3 10",
        "GET rl:cl",
        "DEL rl:cl",
        "SET rl:x 1",
        "RESTORE rl:x 0 payload",
        "KEYS *",
    ] {
        let e = err(c, refused);
        assert!(e.starts_with("NOPERM"), "{refused}: {e}");
    }
    let admin = &mut s.conn();
    for effect in ["rl:e1", "rl:e2"] {
        assert_eq!(cmd(admin, &format!("EXISTS {effect}")), Ok(Value::Int(0)));
    }
    if has_module_acl_categories() {
        let category = |c: &mut redis::Connection, name: &str| {
            let mut names: Vec<String> = redis::cmd("ACL").arg("CAT").arg(name).query(c).unwrap();
            names.sort();
            names
        };
        let sorted = |names: &[&str]| {
            let mut v: Vec<String> = names.iter().map(|n| n.to_string()).collect();
            v.sort();
            v
        };
        assert_eq!(category(admin, "ratelimit"), sorted(COMMANDS));
        assert_eq!(category(admin, "ratelimit-internal"), sorted(EFFECTS));
        // Some servers list CL.POLICY's subcommands in its category too.
        let mut operators = category(admin, "ratelimit-admin");
        operators.retain(|n| !n.starts_with("cl.policy|"));
        assert_eq!(operators, sorted(ADMIN));
    }
    if server_version().has_internal_commands() {
        // Internal commands are hidden from what clients list.
        let u = &mut s.user_conn();
        let mut listed: Vec<String> = redis::cmd("COMMAND")
            .arg(&["LIST", "FILTERBY", "MODULE", "redis-cell"])
            .query(u)
            .unwrap();
        listed.sort();
        // CL.POLICY's subcommands are listed as commands of their own.
        listed.retain(|n| !n.starts_with("cl.policy|"));
        let mut visible: Vec<String> = [COMMANDS, ADMIN]
            .concat()
            .iter()
            .map(|n| n.to_string())
            .collect();
        visible.sort();
        assert_eq!(listed, visible);
        assert_eq!(
            cmd(u, "COMMAND INFO sw.record"),
            Ok(Value::Array(vec![Value::Nil]))
        );
        assert_eq!(cmd(u, "COMMAND DOCS sw.record"), Ok(Value::Array(vec![])));
        // Unknown to any client, even one allowed every command, inside
        // a transaction too (refused when queued, the transaction aborted).
        cmd(u, "MULTI").unwrap();
        for line in EFFECT_CALLS {
            let name = line.split(' ').next().unwrap();
            let e = err(u, line);
            assert!(
                e.starts_with(&format!("ERR unknown command '{name}'")),
                "{line}: {e}"
            );
        }
        assert!(err(u, "EXEC").starts_with("EXECABORT"));
    }
}

/// The load log line says what the module found on this server.
#[test]
fn the_load_log_says_what_was_detected() {
    let s = Server::start();
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let v = server_version();
    let want = format!(
        "command docs and key specs: {}; ACL categories @ratelimit, @ratelimit-admin and @ratelimit-internal: {}; internal commands: {}; subcommands: {}; absolute expiry: yes",
        yes_no(v.has_7_0()),
        yes_no(has_module_acl_categories()),
        yes_no(v.has_internal_commands()),
        yes_no(v.has_7_0()),
    );
    let log = s.log();
    assert!(log.contains(&want), "no {want:?} in the log:\n{log}");
}

/// What the app user does reaches a replica and the AOF as effects, which
/// both apply: the effects are refused to users, not to replication.
#[test]
fn effects_of_the_readme_acl_user_reach_replicas_and_the_aof() {
    let dir = fresh_dir("acl-aof");
    let aof = || Options {
        config: vec![
            ("appendonly".into(), "yes".into()),
            ("appendfsync".into(), "always".into()),
            ("aof-use-rdb-preamble".into(), "no".into()),
        ],
        dir: Some(dir.clone()),
        ..Options::default()
    };
    let master = Server::with(aof());
    let replica = replica_of(&master, vec![]);
    let m = &mut app_user(&master);
    let mut w = Workload::new(0x05EE_DAC1);
    w.run(m, 300, &mut |t| {
        master.set_time(t);
        replica.set_time(t);
    });
    w.finish(m);
    // The refunds' effects (SW.UNRECORD, CC.DROP) too.
    for line in [
        "SW.REFUND rl:sw:last 6 3600 1",
        "CL.REFUND rl:cl:last 4 10 3600 1",
        "FW.REFUND rl:fw:last 5 3600 1",
    ] {
        five(m, line);
    }
    assert_eq!(
        cmd(m, "CC.RELEASE rl:cc:last long-running"),
        Ok(Value::Int(1))
    );
    five(m, "SW.ALLOW rl:sw:end 6 3600 2");
    match cmd(m, "CC.ACQUIRE rl:cc:end 3 3600 ID end") {
        Ok(Value::Array(v)) if v.first() == Some(&Value::Int(0)) => {}
        other => panic!("CC.ACQUIRE: {other:?}"),
    }
    let mut keys = Workload::keys();
    keys.extend(["rl:sw:end".to_string(), "rl:cc:end".to_string()]);
    let admin = &mut master.conn();
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(admin).unwrap();
    assert_eq!(acked, 1, "replica did not acknowledge");
    let before = snapshot(admin, &keys);
    assert!(live(&before) >= 5);
    // A step of the test clock can time the replication link out and
    // start a full resync, during which the replica is briefly empty.
    let r = &mut replica.conn();
    eventually("the replica holds the master's state", || {
        snapshot(r, &keys) == before
    });
    // The AOF as written (effects), then rewritten as commands (SW.LOAD,
    // CC.LOAD), replayed on restart.
    drop(replica);
    let restarted = Server::with(Options {
        dir: Some(master.stop()),
        ..aof()
    });
    let admin = &mut restarted.conn();
    assert_eq!(snapshot(admin, &keys), before);
    rewrite_aof(admin);
    let restarted = Server::with(Options {
        dir: Some(restarted.stop()),
        ..aof()
    });
    assert_eq!(snapshot(&mut restarted.conn(), &keys), before);
    drop(restarted);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Key specs say what each command does with its key, and ACL checks them:
/// a user with read-only key access runs the peeks (as `GET`) and nothing
/// that writes; a user with write-only access runs only what answers
/// nothing from the value.
#[test]
fn key_permissions_follow_the_key_specs() {
    if !server_version().has_7_0() {
        return; // key specs and %R~ / %W~ came with Redis 7.0
    }
    let s = Server::start();
    let admin = &mut s.conn();
    for (user, keys) in [("reader", "%R~rl:*"), ("writer", "%W~rl:*")] {
        cmd(
            admin,
            &format!("ACL SETUSER {user} on >pw {keys} resetchannels +@all"),
        )
        .unwrap();
    }
    let as_user = |user: &str| {
        let mut c = s.user_conn();
        cmd(&mut c, &format!("AUTH {user} pw")).unwrap();
        c
    };
    let reader = &mut as_user("reader");
    let writer = &mut as_user("writer");
    let reads_only = ["CL.PEEK", "SW.PEEK", "FW.PEEK", "CC.PEEK"];
    let writes_only = ["CC.RENEW", "CC.RELEASE"];
    for line in CALLS.iter().chain(&["GET rl:cl", "SET rl:x 1"]) {
        let name = line.split(' ').next().unwrap();
        let reads = !writes_only.contains(&name) && name != "SET";
        let writes = !reads_only.contains(&name) && name != "GET";
        for (c, allowed, who) in [
            (&mut *reader, !writes, "reader"),
            (&mut *writer, !reads, "writer"),
        ] {
            let reply = cmd(c, line);
            let refused = matches!(&reply, Err(e) if e.starts_with("NOPERM"));
            assert_eq!(!refused, allowed, "{who}: {line}: {reply:?}");
        }
    }
}

#[test]
fn inside_multi_eval_and_functions() {
    let s = Server::start();
    let c = &mut s.conn();
    let replies: Value = redis::pipe()
        .atomic()
        .cmd("CL.THROTTLE")
        .arg("m")
        .arg(1)
        .arg(1)
        .arg(10)
        .cmd("SW.ALLOW")
        .arg("ms")
        .arg(1)
        .arg(10)
        .cmd("FW.INCR")
        .arg("mf")
        .arg(1)
        .arg(10)
        .query(c)
        .unwrap();
    let expect = |v: [i64; 5]| Value::Array(v.map(Value::Int).to_vec());
    assert_eq!(
        replies,
        Value::Array(vec![
            expect([0, 2, 1, -1, 10]),
            expect([0, 1, 0, -1, 10]),
            expect([0, 1, 0, -1, 10]),
        ])
    );
    let lua: Value = redis::cmd("EVAL")
        .arg("return redis.call('SW.ALLOW', KEYS[1], 1, 10)")
        .arg(1)
        .arg("ms")
        .query(c)
        .unwrap();
    assert_eq!(lua, expect([1, 1, 0, 10, 10]));
    if !server_version().has_7_0() {
        return; // functions came with Redis 7.0
    }
    let lib = "#!lua name=rl\nredis.register_function('throttle', function(keys, args) return redis.call('CL.THROTTLE', keys[1], args[1], args[2], args[3]) end)";
    redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(lib)
        .query::<String>(c)
        .unwrap();
    let f: Value = redis::cmd("FCALL")
        .arg("throttle")
        .arg(1)
        .arg("m")
        .arg(1)
        .arg(1)
        .arg(10)
        .query(c)
        .unwrap();
    assert_eq!(f, expect([0, 2, 0, -1, 20]));
}

#[test]
fn writes_fire_keyspace_events() {
    let s = Server::start();
    let events = keyspace_events(&s, |c| {
        five(c, "CL.THROTTLE ev:cl 1 1 10");
        five(c, "SW.ALLOW ev:sw 1 10");
        five(c, "FW.INCR ev:fw 2 10");
        five(c, "FW.INCR ev:fw 2 10");
        five(c, "FW.INCR ev:fw 2 10"); // refused: no event
    });
    assert_eq!(
        events,
        [
            "set ev:cl",
            "expire ev:cl",
            "sw.allow ev:sw",
            "expire ev:sw",
            "incrby ev:fw",
            "expire ev:fw",
            "incrby ev:fw",
        ]
    );
}
