//! What a hostile payload, a damaged file, a diskless replica, a watching
//! client or a read-only context must not be able to do: crash the server,
//! write anything, or see a write where nothing changed.

use crate::support::*;

/// CRC-64 as Redis computes it for DUMP payloads (Jones polynomial,
/// reflected, no final xor).
fn crc64(data: &[u8]) -> u64 {
    let mut crc = 0u64;
    for &b in data {
        crc ^= u64::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x95AC_9329_AC4B_C9B5
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// An RDB length, as `rdbSaveLen` writes it.
fn rdb_len(n: u64) -> Vec<u8> {
    if n < 64 {
        vec![n as u8]
    } else if n < 16_384 {
        vec![0x40 | (n >> 8) as u8, n as u8]
    } else if n <= u64::from(u32::MAX) {
        let mut v = vec![0x80];
        v.extend_from_slice(&(n as u32).to_be_bytes());
        v
    } else {
        let mut v = vec![0x81];
        v.extend_from_slice(&n.to_be_bytes());
        v
    }
}

fn bytes(v: Value) -> Vec<u8> {
    match v {
        Value::BulkString(b) => b,
        other => panic!("expected bytes, got {other:?}"),
    }
}

/// The parts of the DUMP of a small module value: the type byte and module
/// id (10 bytes), the state, and the RDB version (2 bytes).
struct Dump {
    head: Vec<u8>,
    state: Vec<u8>,
    version: Vec<u8>,
}

impl Dump {
    fn of(c: &mut redis::Connection, key: &str) -> Self {
        let p = bytes(cmd(c, &format!("DUMP {key}")).unwrap());
        let n = p.len();
        // Our own reading of the format must give back the checksum.
        assert_eq!(
            crc64(&p[..n - 8]).to_le_bytes(),
            p[n - 8..],
            "checksum of {p:?}"
        );
        assert_eq!(&p[..2], &[0x07, 0x81], "a module value with a 64-bit id");
        assert_eq!(p[10], 0x05, "one string opcode");
        let len = usize::from(p[11]);
        assert!(len < 64, "a short state");
        assert_eq!(p[12 + len], 0x00, "then the EOF opcode");
        Dump {
            head: p[..10].to_vec(),
            state: p[12..12 + len].to_vec(),
            version: p[n - 10..n - 8].to_vec(),
        }
    }

    /// A payload of `body` (what follows the module id) with a valid
    /// checksum.
    fn payload(&self, body: &[u8]) -> Vec<u8> {
        let mut p = self.head.clone();
        p.extend_from_slice(body);
        p.extend_from_slice(&self.version);
        let crc = crc64(&p);
        p.extend_from_slice(&crc.to_le_bytes());
        p
    }

    /// The unchanged body: string opcode, length, state, EOF opcode.
    fn body(&self) -> Vec<u8> {
        let mut b = vec![0x05];
        b.extend_from_slice(&rdb_len(self.state.len() as u64));
        b.extend_from_slice(&self.state);
        b.push(0x00);
        b
    }
}

fn restore(c: &mut redis::Connection, key: &str, payload: &[u8]) -> Result<Value, String> {
    redis::cmd("RESTORE")
        .arg(key)
        .arg(0)
        .arg(payload)
        .query::<Value>(c)
        .map_err(error_text)
}

#[test]
fn crafted_restore_payloads_are_refused_and_the_server_stays_up() {
    for sanitize in ["no", "yes"] {
        let s = Server::with(Options {
            config: vec![
                ("sanitize-dump-payload".into(), sanitize.into()),
                // States stay as they are in DUMP payloads, not LZF-packed.
                ("rdbcompression".into(), "no".into()),
            ],
            ..Options::default()
        });
        let c = &mut s.conn();
        five(c, "SW.ALLOW src 5 10 2");
        five(c, "SW.ALLOW srca 5 10 2 APPROX");
        cmd(c, "CC.ACQUIRE srcl 5 10 ID lease").unwrap();
        for src in ["src", "srca", "srcl"] {
            let d = Dump::of(c, src);
            // The checksum is right: an unchanged body restores.
            assert_eq!(restore(c, "copy", &d.payload(&d.body())), Ok(Value::Okay));
            cmd(c, "DEL copy").unwrap();
            let mut wrong_opcode = d.body();
            wrong_opcode[0] = 0x02;
            let mut too_long = vec![0x05];
            too_long.extend_from_slice(&rdb_len(d.state.len() as u64 + 9));
            too_long.extend_from_slice(&d.state);
            too_long.push(0x00);
            let mut cut = d.body();
            cut.truncate(cut.len() - 4);
            let mut huge = vec![0x05];
            huge.extend_from_slice(&rdb_len(1 << 40));
            huge.extend_from_slice(&d.state);
            huge.push(0x00);
            let mut junk_state = d.body();
            junk_state[2] ^= 0xff; // the state's first byte, its kind

            let mut other_encver = d.head.clone();
            other_encver[9] ^= 0x01;
            let mut encver_payload = other_encver.clone();
            encver_payload.extend_from_slice(&d.body());
            encver_payload.extend_from_slice(&d.version);
            let crc = crc64(&encver_payload);
            encver_payload.extend_from_slice(&crc.to_le_bytes());
            let cases = [
                ("opcode 05 -> 02", d.payload(&wrong_opcode)),
                ("length past the end", d.payload(&too_long)),
                ("cut short", d.payload(&cut)),
                ("length 2^40", d.payload(&huge)),
                ("a state that does not decode", d.payload(&junk_state)),
                ("another encoding version", encver_payload),
            ];
            for (what, payload) in cases {
                let e = restore(c, "dst", &payload)
                    .expect_err(&format!("{src}, {what}: restored (sanitize {sanitize})"));
                assert!(e.starts_with("ERR"), "{src}, {what}: {e}");
                assert!(e.contains("Bad data format"), "{src}, {what}: {e}");
                ping(c);
                assert_eq!(cmd(c, "EXISTS dst").unwrap(), Value::Int(0), "{what}");
            }
        }
        assert!(!s.log().contains("Guru Meditation"), "{}", s.log());
    }
}

#[test]
fn a_damaged_rdb_file_is_refused_at_start_up() {
    let config = vec![("rdbchecksum".to_string(), "no".to_string())];
    let s = Server::with(Options {
        config: config.clone(),
        ..Options::default()
    });
    let c = &mut s.conn();
    five(c, "SW.ALLOW k 5 3600 2");
    let d = Dump::of(c, "k");
    cmd(c, "SAVE").unwrap();
    let dir = s.stop();
    let file = dir.join("dump.rdb");
    let mut rdb = std::fs::read(&file).unwrap();
    // The module id (8 bytes after 07 81) followed by the string opcode.
    let mut needle = d.head[2..].to_vec();
    needle.push(0x05);
    let at = rdb
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the module value in dump.rdb");
    rdb[at + 8] = 0x02;
    std::fs::write(&file, rdb).unwrap();
    let (status, log) = Server::refusing_to_start(Options {
        config,
        dir: Some(dir),
        ..Options::default()
    });
    // Refused with an error exit, not a crash.
    assert_eq!(status.code(), Some(1), "{status}; log:\n{log}");
    for crash in ["Guru Meditation", "crashed by signal", "STACK TRACE"] {
        assert!(!log.contains(crash), "{crash}:\n{log}");
    }
}

#[test]
fn replicas_load_diskless_with_the_module_types() {
    let master = Server::with(Options {
        config: vec![("repl-diskless-sync".into(), "yes".into())],
        ..Options::default()
    });
    let m = &mut master.conn();
    five(m, "SW.ALLOW log 5 3600 2");
    five(m, "SW.ALLOW approx 5 3600 2 APPROX");
    five(m, "CL.THROTTLE tat 5 1 3600");
    cmd(m, "CC.ACQUIRE leases 5 3600 ID a").unwrap();
    let keys: Vec<String> = ["log", "approx", "tat", "leases"]
        .map(String::from)
        .to_vec();
    // swapdb loads into a second dataset while serving the old one, which
    // needs the module to declare async-load awareness (Redis 7.0 on).
    for mode in ["on-empty-db", "swapdb"] {
        let replica = replica_of(&master, vec![("repl-diskless-load".into(), mode.into())]);
        let log = replica.log();
        assert!(
            !log.contains("Skipping diskless-load"),
            "{mode}: the replica refused to load diskless:\n{log}"
        );
        assert!(log.contains("to parser"), "{mode}: not diskless:\n{log}");
        assert_eq!(snapshot(&mut replica.conn(), &keys), snapshot(m, &keys));
    }
}

/// Whether `line` sends a client-side-caching invalidation for `key` to a
/// client that has read it (with `peek`, a read-only command).
fn invalidates(s: &Server, key: &str, peek: &str, line: &str) -> bool {
    let mut sub = s.conn();
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut sub).unwrap();
    let mut pubsub = sub.as_pubsub();
    pubsub.subscribe("__redis__:invalidate").unwrap();
    pubsub
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let reader = &mut s.conn();
    cmd(reader, &format!("CLIENT TRACKING on REDIRECT {id}")).unwrap();
    let _ = cmd(reader, peek);
    let _ = cmd(reader, "GET sentinel");
    let _ = cmd(&mut s.conn(), line);
    cmd(&mut s.conn(), "SET sentinel x").unwrap();
    let mut invalidated = false;
    loop {
        let msg = pubsub.get_message().unwrap();
        let keys: Vec<String> = msg.get_payload().unwrap_or_default();
        if keys.iter().any(|k| k == key) {
            invalidated = true;
        }
        if keys.iter().any(|k| k == "sentinel") {
            return invalidated;
        }
    }
}

#[test]
fn only_real_writes_abort_watch_and_invalidate_caches() {
    let s = Server::start();
    let c = &mut s.conn();
    keys_of_every_type(c);
    cmd(c, "SET junk notanumber").unwrap();
    // (setup, run before each check; key; the call; whether it writes; a
    // read-only command that reads the key)
    let cases: &[(&str, &str, &str, bool, &str)] = &[
        ("", "cl", "CL.THROTTLE cl 1 1 60", true, "CL.PEEK cl 1 1 60"),
        (
            "CL.THROTTLE cl2 0 1 60",
            "cl2",
            "CL.THROTTLE cl2 0 1 60",
            false,
            "CL.PEEK cl2 0 1 60",
        ),
        (
            "CL.THROTTLE cl3 5 1 60",
            "cl3",
            "CL.THROTTLE cl3 5 1 60 0",
            true,
            "CL.PEEK cl3 5 1 60",
        ),
        (
            "CL.THROTTLE cl4 5 1 60",
            "cl4",
            "CL.PEEK cl4 5 1 60",
            false,
            "CL.PEEK cl4 5 1 60",
        ),
        (
            "CL.THROTTLE cl5 5 1 60",
            "cl5",
            "CL.THROTTLE cl5 5 1 60 9",
            false,
            "CL.PEEK cl5 5 1 60",
        ),
        (
            "SW.ALLOW sw 5 60",
            "sw",
            "SW.ALLOW sw 5 60",
            true,
            "SW.PEEK sw 5 60",
        ),
        (
            "SW.ALLOW sw2 1 60",
            "sw2",
            "SW.ALLOW sw2 1 60",
            false,
            "SW.PEEK sw2 1 60",
        ),
        (
            "SW.ALLOW sw3 5 60",
            "sw3",
            "SW.ALLOW sw3 5 60 0",
            false,
            "SW.PEEK sw3 5 60",
        ),
        (
            "SW.ALLOW sw4 5 60",
            "sw4",
            "SW.PEEK sw4 5 60",
            false,
            "SW.PEEK sw4 5 60",
        ),
        (
            "SW.ALLOW swa 1 60 APPROX",
            "swa",
            "SW.ALLOW swa 1 60 APPROX",
            false,
            "SW.PEEK swa 1 60 APPROX",
        ),
        (
            "FW.INCR fw 5 60",
            "fw",
            "FW.INCR fw 5 60",
            true,
            "FW.PEEK fw 5 60",
        ),
        (
            "FW.INCR fw2 1 60",
            "fw2",
            "FW.INCR fw2 1 60",
            false,
            "FW.PEEK fw2 1 60",
        ),
        (
            "FW.INCR fw3 5 60",
            "fw3",
            "FW.INCR fw3 5 60 0",
            false,
            "FW.PEEK fw3 5 60",
        ),
        (
            "FW.INCR fw4 5 60",
            "fw4",
            "FW.PEEK fw4 5 60",
            false,
            "FW.PEEK fw4 5 60",
        ),
        // A counter without TTL gets one even when refused: a write.
        (
            "SET stuck 9",
            "stuck",
            "FW.INCR stuck 5 60",
            true,
            "FW.PEEK stuck 5 60",
        ),
        ("", "list", "CL.THROTTLE list 1 1 60", false, "LLEN list"),
        ("", "list", "SW.ALLOW list 1 60", false, "LLEN list"),
        ("", "junk", "CL.THROTTLE junk 1 1 60", false, "GET junk"),
        ("", "junk", "FW.INCR junk 1 60", false, "GET junk"),
        (
            "CL.THROTTLE cl6 5 1 60",
            "cl6",
            "CL.THROTTLE cl6 5 1 60 1 MS MS",
            false,
            "CL.PEEK cl6 5 1 60",
        ),
        (
            "SW.ALLOW sw5 5 60",
            "sw5",
            "SW.ALLOW sw5 5 60 APPROX",
            false,
            "SW.PEEK sw5 5 60",
        ),
    ];
    for &(setup, key, line, writes, peek) in cases {
        let mut setup = || {
            if !setup.is_empty() {
                cmd(c, setup).unwrap();
            }
        };
        setup();
        assert_eq!(aborts_watch(&s, key, line), writes, "WATCH, {line}");
        setup();
        assert_eq!(invalidates(&s, key, peek, line), writes, "tracking, {line}");
    }
}

fn encoding(c: &mut redis::Connection, key: &str) -> String {
    match cmd(c, &format!("OBJECT ENCODING {key}")).unwrap() {
        Value::BulkString(b) => String::from_utf8(b).unwrap(),
        Value::SimpleString(s) => s,
        other => panic!("{other:?}"),
    }
}

#[test]
fn peeks_leave_the_stored_value_as_it_is() {
    let master = Server::start();
    let replica = replica_of(&master, vec![]);
    let m = &mut master.conn();
    five(m, "CL.THROTTLE tat 5 1 60 3");
    cmd(m, "SET counter 3 PX 60000").unwrap();
    cmd(m, "WAIT 1 5000").unwrap();
    cmd(m, "SET tat_int 1700000030000000000 PX 30000").unwrap();
    let r = &mut replica.conn();
    // On the replica the replicated SET stored an integer-encoded value.
    assert_eq!(encoding(r, "tat"), "int");
    assert_eq!(encoding(r, "counter"), "int");
    let memory = |c: &mut redis::Connection, k: &str| cmd(c, &format!("MEMORY USAGE {k}")).unwrap();
    let before = (memory(r, "tat"), memory(r, "counter"));
    assert_eq!(five(r, "CL.PEEK tat 5 1 60"), [0, 6, 3, -1, 180]);
    assert_eq!(five(r, "FW.PEEK counter 5 60"), [0, 5, 2, -1, 60]);
    assert_eq!(encoding(r, "tat"), "int");
    assert_eq!(encoding(r, "counter"), "int");
    assert_eq!((memory(r, "tat"), memory(r, "counter")), before);
    // And on the master, for values it did not write itself.
    assert_eq!(encoding(m, "counter"), "int");
    five(m, "FW.PEEK counter 5 60");
    five(m, "CL.PEEK tat_int 5 1 60");
    assert_eq!(encoding(m, "counter"), "int");
    assert_eq!(encoding(m, "tat_int"), "int");
}

#[test]
fn peeks_work_where_writes_are_refused() {
    let master = Server::start();
    let replica = replica_of(&master, vec![]);
    let m = &mut master.conn();
    five(m, "SW.ALLOW sw 5 60 2");
    five(m, "SW.ALLOW swa 5 60 2 APPROX");
    five(m, "FW.INCR fw 5 60 2");
    cmd(m, "WAIT 1 5000").unwrap();
    let r = &mut replica.conn();
    let expect = [0, 5, 3, -1, 60];
    // A read-only replica.
    assert_eq!(five(r, "SW.PEEK sw 5 60"), expect);
    assert_eq!(five(r, "SW.PEEK swa 5 60 APPROX")[..3], [0, 5, 3]);
    assert_eq!(five(r, "FW.PEEK fw 5 60"), expect);
    assert!(err(r, "SW.ALLOW sw 5 60 0").starts_with("READONLY"));
    // Out of memory under noeviction: writes (even of quantity 0) are
    // refused, peeks answer.
    cmd(m, "CONFIG SET maxmemory-policy noeviction").unwrap();
    cmd(m, "CONFIG SET maxmemory 1").unwrap();
    assert!(err(m, "SW.ALLOW sw 5 60 0").starts_with("OOM"));
    assert!(err(m, "FW.INCR fw 5 60 0").starts_with("OOM"));
    assert_eq!(five(m, "SW.PEEK sw 5 60"), expect);
    assert_eq!(five(m, "FW.PEEK fw 5 60"), expect);
    cmd(m, "CONFIG SET maxmemory 0").unwrap();
    if server_version().has_7_0() {
        for (line, want) in [
            ("return redis.call('SW.PEEK', KEYS[1], 5, 60)", "sw"),
            ("return redis.call('FW.PEEK', KEYS[1], 5, 60)", "fw"),
        ] {
            let v: Vec<i64> = redis::cmd("EVAL_RO")
                .arg(line)
                .arg(1)
                .arg(want)
                .query(r)
                .unwrap();
            assert_eq!(v, expect, "{line}");
        }
    }
}

#[test]
fn sw_load_sets_the_expiry_of_what_it_loads() {
    let s = Server::start();
    let c = &mut s.conn();
    five(c, "SW.ALLOW src 5 10 2");
    s.set_time(T0 + 4 * SEC);
    five(c, "SW.ALLOW src 5 10 1");
    let payload = |c: &mut redis::Connection| {
        let v: Vec<u8> = redis::cmd("DUMP").arg("src").query(c).unwrap();
        // The state, as SW.LOAD takes it: the string inside the DUMP.
        let len = usize::from(v[11]);
        v[12..12 + len].to_vec()
    };
    let p = payload(c);
    // On a missing key: expiring when the newest request leaves.
    redis::cmd("SW.LOAD")
        .arg("fresh")
        .arg(&p)
        .query::<()>(c)
        .unwrap();
    assert_eq!(pttl(c, "fresh"), 10_000);
    assert_eq!(five(c, "SW.PEEK fresh 5 10"), five(c, "SW.PEEK src 5 10"));
    // On an existing key with another expiry: the loaded one wins.
    five(c, "SW.ALLOW other 5 3600");
    redis::cmd("SW.LOAD")
        .arg("other")
        .arg(&p)
        .query::<()>(c)
        .unwrap();
    assert_eq!(pttl(c, "other"), 10_000);
    // An empty window deletes the key; a payload without its window (as
    // the first release wrote them) is refused.
    let mut empty = vec![b'E'];
    empty.extend_from_slice(&(10 * SEC).to_le_bytes());
    empty.extend_from_slice(&[1, 0, 0, 0, 0]);
    redis::cmd("SW.LOAD")
        .arg("other")
        .arg(&empty)
        .query::<()>(c)
        .unwrap();
    assert_eq!(cmd(c, "EXISTS other").unwrap(), Value::Int(0));
    let mut legacy = vec![b'L'];
    legacy.extend_from_slice(&p[9..]);
    let e = redis::cmd("SW.LOAD")
        .arg("old")
        .arg(&legacy)
        .query::<()>(c)
        .map_err(error_text)
        .unwrap_err();
    assert_eq!(
        e,
        "ERR invalid SW.LOAD payload: written without its window (by redis-cell's first release), so its expiry is unknown"
    );
    assert_eq!(cmd(c, "EXISTS old").unwrap(), Value::Int(0));
}

/// An APPROX state the commands cannot produce (a negative window index,
/// or one whose expiry is past 2262) is refused by `SW.LOAD` and `RESTORE`
/// alike, before anything is written: an existing key keeps its state and
/// expiry, an absent one stays absent, and the replica holds what the
/// master holds.
#[test]
fn approx_states_the_commands_cannot_produce_are_refused_and_write_nothing() {
    let master = Server::with(Options {
        config: vec![("rdbcompression".into(), "no".into())],
        ..Options::default()
    });
    let replica = replica_of(&master, vec![("rdbcompression".into(), "no".into())]);
    let m = &mut master.conn();
    five(m, "SW.ALLOW existing 5 60 2 APPROX");
    let d = Dump::of(m, "existing");
    let approx = |window: i64, index: i64| {
        let mut state = vec![b'A'];
        for v in [window, index, 3, 1] {
            state.extend_from_slice(&v.to_le_bytes());
        }
        state
    };
    let ms = 1_000_000;
    let crafted = [
        ("expiry at -1 ms", approx(ms, -3)),
        ("expiry at 0", approx(ms, -2)),
        ("index -1", approx(60 * SEC, -1)),
        ("index -1e9", approx(60 * SEC, -1_000_000_000)),
        ("index i64::MIN", approx(60 * SEC, i64::MIN)),
        (
            "expiry past 2262",
            approx(60 * SEC, i64::MAX / (60 * SEC) - 1),
        ),
    ];
    let keys: Vec<String> = ["existing", "fresh"].map(String::from).to_vec();
    let before = snapshot(m, &keys);
    for (what, state) in &crafted {
        for key in ["existing", "fresh"] {
            let e = redis::cmd("SW.LOAD")
                .arg(key)
                .arg(state)
                .query::<()>(m)
                .map_err(error_text)
                .expect_err(what);
            assert_eq!(
                e, "ERR invalid SW.LOAD payload: not a serialized sliding window",
                "{what}"
            );
            let mut body = vec![0x05];
            body.extend_from_slice(&rdb_len(state.len() as u64));
            body.extend_from_slice(state);
            body.push(0x00);
            let e = redis::cmd("RESTORE")
                .arg(key)
                .arg(0)
                .arg(d.payload(&body))
                .arg("REPLACE")
                .query::<()>(m)
                .map_err(error_text)
                .expect_err(what);
            assert!(e.contains("Bad data format"), "{what}: {e}");
        }
        assert_eq!(snapshot(m, &keys), before, "{what}");
    }
    // The last index whose state expires within 64 bits loads.
    let last = approx(60 * SEC, i64::MAX / (60 * SEC) - 2);
    redis::cmd("SW.LOAD")
        .arg("edge")
        .arg(&last)
        .query::<()>(m)
        .unwrap();
    assert!(pttl(m, "edge") > 0);
    assert_eq!(cmd(m, "WAIT 1 5000").unwrap(), Value::Int(1));
    let keys: Vec<String> = ["existing", "fresh", "edge"].map(String::from).to_vec();
    assert_eq!(snapshot(&mut replica.conn(), &keys), snapshot(m, &keys));
}

/// The registered arity admits the shortest call the grammar admits:
/// one key and one policy, five words, also in a transaction.
#[test]
fn the_shortest_throttleall_call_is_not_a_wrong_arity() {
    let s = Server::start();
    let c = &mut s.conn();
    cmd(c, "CL.POLICY SET p GCRA 1 1 1").unwrap();
    assert_eq!(
        cmd(c, "CL.THROTTLEALL 1 k POLICY p"),
        Ok(Value::Array([0, 2, 1, -1, 1, 1].map(Value::Int).to_vec()))
    );
    cmd(c, "MULTI").unwrap();
    cmd(c, "CL.THROTTLEALL 1 k2 POLICY p").unwrap();
    let Value::Array(replies) = cmd(c, "EXEC").unwrap() else {
        panic!("EXEC answers an array")
    };
    assert_eq!(replies.len(), 1);
    assert!(
        matches!(&replies[0], Value::Array(v) if v.len() == 6),
        "{replies:?}"
    );
    assert_eq!(
        err(c, "CL.THROTTLEALL 1 k POLICY"),
        as_server_says(
            "CL.THROTTLEALL 1 k POLICY",
            "ERR wrong number of arguments for 'cl.throttleall' command"
        )
    );
}
