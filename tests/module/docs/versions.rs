//! One version everywhere: Cargo.toml's, in the load log, in `COMMAND
//! DOCS` (`since`) and, as major * 10000 + minor * 100 + patch, in `MODULE
//! LIST`'s `ver`.

use crate::support::*;

/// The version this build was made from, as `MODULE LIST` must report it.
fn expected_ver() -> i64 {
    let parts: Vec<i64> = env!("CARGO_PKG_VERSION")
        .split('.')
        .map(|p| p.parse().expect("a numeric version component"))
        .collect();
    assert_eq!(parts.len(), 3, "a major.minor.patch version");
    parts[0] * 10_000 + parts[1] * 100 + parts[2]
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

#[test]
fn module_list_ver_is_the_cargo_version_as_one_integer() {
    let s = Server::start();
    let mut c = s.conn();
    let Value::Array(modules) = cmd(&mut c, "MODULE LIST").unwrap() else {
        panic!("MODULE LIST is not an array");
    };
    let mut found = None;
    for module in modules {
        // RESP2: a flat list of field names and values.
        let fields = match module {
            Value::Array(f) => f,
            Value::Map(m) => m.into_iter().flat_map(|(k, v)| [k, v]).collect(),
            other => panic!("unexpected MODULE LIST entry {other:?}"),
        };
        let field = |name: &str| {
            fields
                .chunks(2)
                .find(|kv| text(&kv[0]) == name)
                .map(|kv| kv[1].clone())
        };
        if field("name").map(|n| text(&n)) == Some("redis-cell".to_string()) {
            found = field("ver");
        }
    }
    assert_eq!(found, Some(Value::Int(expected_ver())));
    // 0.4.0 is the fourth release; the three before it said 0.1.0 and 1.
    assert!(expected_ver() >= 400, "ver {}", expected_ver());
}

#[test]
fn the_load_log_names_the_cargo_version() {
    let s = Server::start();
    let want = format!("redis-cell {} loaded on server ", env!("CARGO_PKG_VERSION"));
    assert!(
        s.log().contains(&want),
        "no {want:?} in the log:\n{}",
        s.log()
    );
}

#[test]
fn command_docs_since_is_the_cargo_version() {
    if !server_version().has_7_0() {
        // Redis 6.2 has no COMMAND DOCS: the command itself is unknown.
        let s = Server::start();
        let mut c = s.conn();
        assert!(cmd(&mut c, "COMMAND DOCS cl.throttle").is_err());
        return;
    }
    let s = Server::start();
    let mut c = s.conn();
    for name in [
        "cl.throttle",
        "sw.allow",
        "fw.incr",
        "cl.policy",
        "cc.acquire",
    ] {
        let docs = cmd(&mut c, &format!("COMMAND DOCS {name}")).unwrap();
        let fields: Vec<Value> = match docs {
            Value::Array(mut top) => match top.pop() {
                Some(Value::Array(f)) => f,
                other => panic!("COMMAND DOCS {name}: {other:?}"),
            },
            Value::Map(mut top) => match top.pop() {
                Some((_, Value::Map(m))) => m.into_iter().flat_map(|(k, v)| [k, v]).collect(),
                other => panic!("COMMAND DOCS {name}: {other:?}"),
            },
            other => panic!("COMMAND DOCS {name}: {other:?}"),
        };
        let since = fields
            .chunks(2)
            .find(|kv| text(&kv[0]) == "since")
            .map(|kv| text(&kv[1]));
        assert_eq!(since.as_deref(), Some(env!("CARGO_PKG_VERSION")), "{name}");
    }
}

/// `s` with every field's value blanked: what is left is the line's shape
/// (the fields it names, in order), which is the same on every server.
fn shape(line: &str) -> String {
    line.split("; ")
        .map(|part| match part.rsplit_once(": ") {
            Some((name, _)) => format!("{name}: _"),
            None => match part.split_once(" loaded on server ") {
                Some((who, _)) => format!("{who} loaded on server _"),
                None => part.to_string(),
            },
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[test]
fn the_readmes_load_log_is_the_line_a_server_prints() {
    let readme = std::fs::read_to_string(concat!(root!(), "/README.md")).unwrap();
    let shown = readme
        .lines()
        .find_map(|l| l.strip_prefix("<redis-cell> "))
        .expect("README.md shows the load log line");
    let s = Server::start();
    let log = s.log();
    let printed = log
        .lines()
        .filter_map(|l| l.split_once("<redis-cell> ").map(|(_, rest)| rest))
        .find(|rest| rest.starts_with("redis-cell "))
        .unwrap_or_else(|| panic!("no load line in the log:\n{log}"));
    assert_eq!(
        shape(shown),
        shape(printed),
        "README.md's load line has other fields"
    );
    assert!(
        shown.starts_with(&format!("redis-cell {} loaded", env!("CARGO_PKG_VERSION"))),
        "README.md's load line names another version: {shown}"
    );
    // On the server the README names, the line is the same to the letter.
    let server_of = |l: &str| {
        l.split_once(" loaded on server ")
            .and_then(|(_, r)| r.split(';').next())
            .map(str::to_string)
    };
    if server_of(shown) == server_of(printed) {
        assert_eq!(shown, printed);
    }
}

/// The Python and Node packages carry the workspace's version (written by
/// `scripts/version set`); a release of one is a release of all.
#[test]
fn every_deliverable_carries_the_one_version() {
    let root = root!();
    let read = |p: &str| std::fs::read_to_string(format!("{root}/{p}")).unwrap();
    let want = env!("CARGO_PKG_VERSION");
    let pyproject = read("clients/python/pyproject.toml");
    let py = pyproject
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'));
    assert_eq!(py, Some(want), "clients/python/pyproject.toml");
    for p in [
        "clients/node/package.json",
        "clients/node/package-lock.json",
    ] {
        let text = read(p);
        let quoted = format!("\"version\": \"{want}\"");
        // The package's own version is the first "version" of the file.
        let first = text
            .lines()
            .find(|l| l.trim_start().starts_with("\"version\""));
        assert_eq!(
            first.map(|l| l.trim().trim_end_matches(',')),
            Some(quoted.as_str()),
            "{p}"
        );
    }
    for p in ["core/Cargo.toml", "rls/Cargo.toml", "bench/Cargo.toml"] {
        assert!(
            read(p).contains("\nversion.workspace = true\n"),
            "{p} takes the workspace's version"
        );
    }
}
