//! Master and replica: the replica receives the effect of each allowed
//! call, never the command, so it holds exactly the master's state even
//! when its own clock disagrees.

mod support;
use support::*;

fn replica_of(master: &Server) -> Server {
    let replica = Server::start();
    cmd(
        &mut replica.conn(),
        &format!("REPLICAOF 127.0.0.1 {}", master.port),
    )
    .unwrap();
    let r = &mut replica.conn();
    eventually("replica link up", || {
        let info: String = redis::cmd("INFO").arg("replication").query(r).unwrap();
        info.contains("master_link_status:up")
    });
    replica
}

/// Blocks until the replica has applied everything the master sent.
pub fn sync(master: &mut redis::Connection) {
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(master).unwrap();
    assert_eq!(acked, 1, "replica did not acknowledge");
}

fn command_calls(c: &mut redis::Connection, name: &str) -> i64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

#[test]
fn replica_holds_the_masters_tat_whatever_its_clock() {
    let master = Server::start();
    let replica = replica_of(&master);
    let m = &mut master.conn();
    let r = &mut replica.conn();

    // Deterministic pseudo-random workload over a few keys and parameters.
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut now = T0;
    let mut allowed = 0;
    let mut limited = 0;
    for _ in 0..400 {
        now += (next(400) as i64) * MS + next(1000) as i64;
        master.set_time(now);
        // The replica's clock is off by seconds; it must not matter.
        replica.set_time(now + 7 * SEC + 123_456);
        let key = format!("rl:{}", next(6));
        let line = match next(4) {
            0 => format!("CL.THROTTLE {key} 5 10 1"),
            1 => format!("CL.THROTTLE {key} 2 3 0.5 {}", next(3)),
            2 => format!("CL.PEEK {key} 5 10 1"),
            _ => format!("CL.THROTTLE {key} 9 1 60 {}", next(4)),
        };
        let reply = five(m, &line);
        if line.starts_with("CL.THROTTLE") {
            if reply[0] == 0 {
                allowed += 1;
            } else {
                limited += 1;
            }
        }
    }
    assert!(
        allowed > 50 && limited > 50,
        "workload too one-sided: {allowed}/{limited}"
    );
    sync(m);
    replica.set_time(now);

    for i in 0..6 {
        let key = format!("rl:{i}");
        assert_eq!(get(r, &key), get(m, &key), "{key} value");
        assert_eq!(pttl(r, &key), pttl(m, &key), "{key} ttl");
    }
    assert_eq!(
        command_calls(r, "cl.throttle"),
        0,
        "commands must not be replicated"
    );
    assert_eq!(command_calls(r, "cl.peek"), 0);
    // Every allowed call is one SET; limited calls and peeks send nothing.
    assert_eq!(command_calls(r, "set"), allowed);
}

#[test]
fn peek_works_on_a_read_only_replica() {
    let master = Server::start();
    let replica = replica_of(&master);
    let m = &mut master.conn();
    five(m, "CL.THROTTLE ro 4 1 10 2");
    sync(m);
    let r = &mut replica.conn();
    assert_eq!(five(r, "CL.PEEK ro 4 1 10"), [0, 5, 3, -1, 20]);
    let e = err(r, "CL.THROTTLE ro 4 1 10");
    assert!(e.starts_with("READONLY"), "{e}");
}
