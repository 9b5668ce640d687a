//! What operators see and rely on: INFO counters, COMMAND DOCS, ACL
//! restrictions, and the commands inside MULTI, EVAL and functions.

mod support;
use support::*;

fn info_field(c: &mut redis::Connection, field: &str) -> i64 {
    let info: String = redis::cmd("INFO").arg("redis-cell").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("redis-cell_{field}:")))
        .unwrap_or_else(|| panic!("{field} missing from {info}"))
        .trim()
        .parse()
        .unwrap()
}

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

/// The commands users call.
const COMMANDS: &[&str] = &[
    "cl.throttle",
    "cl.peek",
    "cl.throttleall",
    "cl.reserve",
    "cl.refund",
    "sw.allow",
    "sw.peek",
    "sw.refund",
    "fw.incr",
    "fw.peek",
    "fw.refund",
    "cc.acquire",
    "cc.release",
    "cc.renew",
    "cc.peek",
    "cl.limit",
    "cl.policy",
    "cl.top",
];

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
    let text = |v: &Value| match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).to_string()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
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

#[test]
fn command_docs_for_every_command() {
    let s = Server::start();
    let c = &mut s.conn();
    let names = [COMMANDS, EFFECTS].concat();
    if server_version().has_7_0() {
        // Every command the module registers is in the list above.
        let mut registered: Vec<String> = redis::cmd("COMMAND")
            .arg(&["LIST", "FILTERBY", "MODULE", "redis-cell"])
            .query(c)
            .unwrap();
        registered.sort();
        let mut listed: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        listed.sort();
        assert_eq!(registered, listed);
    }
    for name in names {
        let page = format!("{}/docs/commands/{name}.md", env!("CARGO_MANIFEST_DIR"));
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
    }
}

#[test]
fn an_acl_user_limited_to_the_module_on_its_keys() {
    let s = Server::start();
    let admin = &mut s.conn();
    cmd(
        admin,
        "ACL SETUSER limiter on >secret ~rl:* resetchannels -@all +cl.throttle +cl.peek +sw.allow +fw.incr",
    )
    .unwrap();
    cmd(admin, "SET other 1").unwrap();
    let c = &mut s.conn();
    cmd(c, "AUTH limiter secret").unwrap();
    assert_eq!(five(c, "CL.THROTTLE rl:u1 4 1 10"), [0, 5, 4, -1, 10]);
    assert_eq!(five(c, "CL.PEEK rl:u1 4 1 10"), [0, 5, 4, -1, 10]);
    assert_eq!(five(c, "SW.ALLOW rl:u2 3 10"), [0, 3, 2, -1, 10]);
    assert_eq!(five(c, "FW.INCR rl:u3 3 10"), [0, 3, 2, -1, 10]);
    for refused in [
        "CL.THROTTLE other 4 1 10",
        "SW.ALLOW other 3 10",
        "GET rl:u1",
        "DEL rl:u1",
        "SET rl:x 1",
        "SW.RECORD rl:u2 1000 1 1",
        "KEYS *",
    ] {
        let e = err(c, refused);
        assert!(e.starts_with("NOPERM"), "{refused}: {e}");
    }
    // Where the server supports module ACL categories, @ratelimit names
    // the commands.
    let cats: Vec<String> = redis::cmd("ACL").arg("CAT").query(admin).unwrap();
    if cats.iter().any(|c| c == "ratelimit") {
        let in_cat: Vec<String> = redis::cmd("ACL")
            .arg("CAT")
            .arg("ratelimit")
            .query(admin)
            .unwrap();
        for name in COMMANDS {
            assert!(
                in_cat.iter().any(|c| c == name),
                "{name} not in @ratelimit: {in_cat:?}"
            );
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
