use super::*;
use crate::config::{Config, ConfigFile, Entry};

fn limit(yaml_rl: &str) -> RateLimit {
    let c = Config::load(
        &[ConfigFile {
            name: "config.t".into(),
            text: format!("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {yaml_rl}\n"),
        }],
        false,
    )
    .unwrap();
    c.get_limit("d", &[entry("k", "v")], None).unwrap()
}

fn entry(k: &str, v: &str) -> Entry {
    Entry {
        key: k.into(),
        value: v.into(),
    }
}

#[test]
fn reference_cache_keys() {
    let l = limit("{unit: minute, requests_per_unit: 5}");
    let es = [entry("k", "v")];
    assert_eq!(
        cache_key("", None, "d", &es, &l, 1_700_000_059),
        "d_k_v_1700000040"
    );
    assert_eq!(
        cache_key("pre_", None, "d", &es, &l, 1_700_000_059),
        "pre_d_k_v_1700000040"
    );
    assert_eq!(cache_key("", Some("d"), "d", &es, &l, 60), "{d}d_k_v_60");
    let g = limit("{unit: second, requests_per_unit: 5, algorithm: gcra}");
    assert_eq!(cache_key("", None, "d", &es, &g, 7), "d_k_v_gcra");
    let month = limit("{unit: month, requests_per_unit: 5}");
    assert_eq!(
        cache_key("", None, "d", &es, &month, 2_592_000 * 3 + 5),
        "d_k_v_7776000"
    );
}

fn charge(i: usize, l: RateLimit, hits: u64) -> Charge {
    Charge {
        index: i,
        key: format!("k{i}"),
        limit: l,
        hits,
        negative: false,
    }
}

#[test]
fn reference_mode_counts_every_hit() {
    let cs = [charge(0, limit("{unit: second, requests_per_unit: 5}"), 2)];
    let p = plan(&cs, Mode::Reference);
    assert!(!p.atomic);
    // The real limit, counting every hit (COUNTALL): the module sees the
    // refusals while the counter grows as the reference's INCRBY.
    assert_eq!(
        p.commands,
        vec![vec!["FW.INCR", "k0", "5", "1", "2", "ALIGN", "COUNTALL"]]
    );
    // The counter reads 7 after the increment (remaining -2): over, 2
    // over the limit.
    let o = interpret(&p, &cs, &[vec![1, 5, -2, 1, 1]])
        .unwrap()
        .outcomes;
    assert_eq!(
        o[0],
        Outcome {
            index: 0,
            over: true,
            before: 5,
            after: 7,
            remaining: 0,
            capacity: 5,
            reset_secs: None,
            negative: false,
        }
    );
    // Within the limit: what is left.
    let o = interpret(&p, &cs, &[vec![0, 5, 1, -1, 1]])
        .unwrap()
        .outcomes;
    assert_eq!(
        (o[0].over, o[0].before, o[0].after, o[0].remaining),
        (false, 2, 4, 1)
    );
    // A count far past 32 bits, as the reference's INCRBY keeps it.
    let big = (1i64 << 40) + 3;
    let o = interpret(&p, &cs, &[vec![1, 5, 5 - big, 1, 1]])
        .unwrap()
        .outcomes;
    assert_eq!((o[0].before, o[0].after), (big as u64 - 2, big as u64));
}

#[test]
fn a_policy_is_named_in_each_single_call_and_decides() {
    let fw = limit("{unit: minute, requests_per_unit: 5, policy: edge-user}");
    assert_eq!(fw.policy.as_deref(), Some("edge-user"));
    let cs = [charge(0, fw.clone(), 1)];
    let p = plan(&cs, Mode::Reference);
    assert_eq!(
        p.commands,
        vec![vec![
            "FW.INCR",
            "k0",
            "5",
            "60",
            "1",
            "ALIGN",
            "COUNTALL",
            "POLICY",
            "edge-user"
        ]]
    );
    // The policy's limit (20) is the one in the reply: 6 is within it.
    let o = interpret(&p, &cs, &[vec![0, 20, 14, -1, 30]])
        .unwrap()
        .outcomes;
    assert_eq!(
        (o[0].over, o[0].after, o[0].capacity, o[0].remaining),
        (false, 6, 20, 14)
    );
    // A shadow policy answers allowed while counting over its limit: the
    // module's verdict stands.
    let o = interpret(&p, &cs, &[vec![0, 3, -3, -1, 30]])
        .unwrap()
        .outcomes;
    assert!(!o[0].over);
    let o = interpret(&p, &cs, &[vec![1, 3, -3, 30, 30]])
        .unwrap()
        .outcomes;
    assert!(o[0].over);
    // Hits past the counting limit: a peek of the policy.
    let huge = [charge(0, fw.clone(), u64::MAX)];
    assert_eq!(
        plan(&huge, Mode::Reference).commands,
        vec![vec![
            "FW.PEEK",
            "k0",
            "5",
            "60",
            "ALIGN",
            "COUNTALL",
            "POLICY",
            "edge-user"
        ]]
    );
    let gcra = limit("{unit: second, requests_per_unit: 5, algorithm: gcra, policy: g}");
    let p = plan(&[charge(0, gcra.clone(), 1)], Mode::Reference);
    assert_eq!(
        p.commands,
        vec![vec!["CL.THROTTLE", "k0", "4", "5", "1", "1", "POLICY", "g"]]
    );
    // A shadow rule: its peek and its SHADOW call both name the policy.
    let mut shadow = gcra;
    shadow.shadow_mode = true;
    let p = plan(&[charge(0, shadow, 1)], Mode::Reference);
    assert_eq!(
        p.commands[0],
        vec!["CL.PEEK", "k0", "4", "5", "1", "POLICY", "g"]
    );
    assert_eq!(
        p.commands[1],
        vec![
            "CL.THROTTLE",
            "k0",
            "4",
            "5",
            "1",
            "1",
            "SHADOW",
            "POLICY",
            "g"
        ]
    );
    // CL.THROTTLEALL and its peeks decide by the rule's own numbers
    // (a POLICY there has no fallback), and refunds take no policy.
    let p = plan(&cs, Mode::AllOrNothing);
    assert!(
        p.commands
            .iter()
            .all(|c| !c.contains(&"POLICY".to_string())),
        "{:?}",
        p.commands
    );
    let mut neg = charge(0, fw, 1);
    neg.negative = true;
    let p = plan(&[neg], Mode::Reference);
    assert_eq!(
        p.commands,
        vec![vec!["FW.REFUND", "k0", &C.to_string(), "60", "1", "ALIGN"]]
    );
}

#[test]
fn a_shadow_rule_counts_with_shadow_and_is_judged_by_its_count() {
    let mut l = limit("{unit: hour, requests_per_unit: 2}");
    l.shadow_mode = true;
    let cs = [charge(0, l, 1)];
    let p = plan(&cs, Mode::Reference);
    assert_eq!(
        p.commands,
        vec![vec![
            "FW.INCR", "k0", "2", "3600", "1", "ALIGN", "COUNTALL", "SHADOW"
        ]]
    );
    // SHADOW answers allowed; the count says it is over (the service then
    // answers OK and counts the shadow_mode stat).
    let o = interpret(&p, &cs, &[vec![0, 2, -1, -1, 100]])
        .unwrap()
        .outcomes;
    assert!(o[0].over);
    assert_eq!((o[0].before, o[0].after), (2, 3));
}

#[test]
fn all_or_nothing_is_one_call_with_peeks() {
    let cs = [
        charge(0, limit("{unit: second, requests_per_unit: 5}"), 1),
        charge(
            2,
            limit("{unit: minute, requests_per_unit: 3, algorithm: sliding_window}"),
            1,
        ),
    ];
    let p = plan(&cs, Mode::AllOrNothing);
    assert!(p.atomic);
    assert_eq!(
        p.commands[0],
        vec![
            "CL.THROTTLEALL",
            "2",
            "k0",
            "k2",
            "FW",
            "5",
            "1",
            "ALIGN",
            "SW",
            "3",
            "60",
            "QUANTITY",
            "1"
        ]
    );
    assert_eq!(p.commands[1], vec!["FW.PEEK", "k0", "5", "1", "ALIGN"]);
    assert_eq!(p.commands[2], vec!["SW.PEEK", "k2", "3", "60"]);
    // Refused by the second: nothing written; the first could take it alone.
    let o = interpret(
        &p,
        &cs,
        &[
            vec![1, 3, 0, 20, 20, 2],
            vec![0, 5, 4, -1, 1],
            vec![0, 3, 0, -1, 20],
        ],
    )
    .unwrap()
    .outcomes;
    assert!(!o[0].over && o[1].over);
    assert_eq!((o[1].before, o[1].after), (3, 4));
}

#[test]
fn shadow_is_a_peek_then_the_module_shadow() {
    let mut l = limit("{unit: second, requests_per_unit: 2, algorithm: gcra}");
    l.shadow_mode = true;
    let cs = [charge(0, l, 1)];
    let p = plan(&cs, Mode::Reference);
    assert!(p.atomic);
    assert_eq!(
        p.commands[1],
        vec!["CL.THROTTLE", "k0", "1", "2", "1", "1", "SHADOW"]
    );
    let o = interpret(&p, &cs, &[vec![0, 2, 0, -1, 1], vec![0, 2, 0, -1, 1]])
        .unwrap()
        .outcomes;
    assert!(o[0].over);
}

#[test]
fn different_hits_split_the_call() {
    let l = limit("{unit: second, requests_per_unit: 5}");
    let cs = [charge(0, l.clone(), 1), charge(1, l, 2)];
    let p = plan(&cs, Mode::AllOrNothing);
    let calls = p
        .commands
        .iter()
        .filter(|c| c[0] == "CL.THROTTLEALL")
        .count();
    assert_eq!(calls, 2);
}

#[test]
fn short_replies_are_errors() {
    let cs = [charge(0, limit("{unit: second, requests_per_unit: 5}"), 1)];
    let p = plan(&cs, Mode::Reference);
    assert!(interpret(&p, &cs, &[vec![0, 1]]).is_err());
    assert!(interpret(&p, &cs, &[]).is_err());
}

const C: i64 = COUNTING_LIMIT;

fn keyed(i: usize, key: &str, l: RateLimit, hits: u64) -> Charge {
    Charge {
        key: key.into(),
        ..charge(i, l, hits)
    }
}

#[test]
fn hits_past_the_counting_limit_are_over_without_counting() {
    let l = limit("{unit: hour, requests_per_unit: 5}");
    for hits in [(1u64 << 62) + 1, (1 << 63) - 1, 1 << 63, u64::MAX] {
        let cs = [charge(0, l.clone(), hits)];
        let p = plan(&cs, Mode::Reference);
        // A peek, never a quantity the module would refuse.
        assert_eq!(
            p.commands,
            vec![vec!["FW.PEEK", "k0", "5", "3600", "ALIGN", "COUNTALL"]]
        );
        let o = interpret(&p, &cs, &[vec![0, 5, 3, -1, 100]]).unwrap();
        let o = &o.outcomes[0];
        assert!(o.over, "{hits}");
        assert_eq!(
            (o.before, o.after, o.remaining),
            (2, 2u64.saturating_add(hits), 0)
        );
    }
    // Up to the counting limit the hits are counted, as the reference's INCRBY.
    let cs = [charge(0, l.clone(), 1 << 62)];
    let p = plan(&cs, Mode::Reference);
    assert_eq!(p.commands[0][0], "FW.INCR");
    assert_eq!(p.commands[0][4], (1u64 << 62).to_string());
    // The module refuses uncounted the hits that would take the count past
    // 2^63 - 1: over, with the count it had, not a count less the hits.
    let had = i64::MAX - 3;
    let o = interpret(&p, &cs, &[vec![1, 5, 5 - had, -1, 100]]).unwrap();
    let o = &o.outcomes[0];
    assert!(o.over);
    assert_eq!((o.before, o.after), (had as u64, had as u64 + (1 << 62)));
    // A reply no module gives (a count below the hits): no underflow.
    let o = interpret(&p, &cs, &[vec![0, 5, 5, -1, 100]]).unwrap();
    assert_eq!((o.outcomes[0].before, o.outcomes[0].after), (0, 0));
}

#[test]
fn hits_a_limiter_can_never_hold_are_over_before_redis() {
    let gcra = limit("{unit: second, requests_per_unit: 5, algorithm: gcra}");
    let sw = limit("{unit: minute, requests_per_unit: 3, algorithm: sliding_window}");
    let burst = limit("{unit: second, requests_per_unit: 5, algorithm: gcra, burst: 9}");
    assert_eq!(
        (gcra.capacity(), sw.capacity(), burst.capacity()),
        (5, 3, 10)
    );
    for (l, cap) in [(gcra, 5u64), (sw, 3), (burst, 10)] {
        for mode in [Mode::Reference, Mode::AllOrNothing] {
            let fits = [charge(0, l.clone(), cap)];
            assert!(!never_fits(&fits, mode));
            let p = plan(&fits, mode);
            assert!(p.commands[0][0] != "CL.PEEK" && p.commands[0][0] != "SW.PEEK");
            for hits in [cap + 1, 1 << 32, u64::MAX] {
                let cs = [charge(0, l.clone(), hits), charge(1, l.clone(), 1)];
                let p = plan(&cs, mode);
                assert!(
                    p.commands.iter().all(|c| c[0].ends_with(".PEEK")
                        || (mode == Mode::Reference && c[0] != "CL.THROTTLEALL")),
                    "{mode:?} {hits}: {:?}",
                    p.commands
                );
                assert!(p.commands.iter().all(|c| c
                    .iter()
                    .all(|w| w.parse::<u64>().map_or(true, |n| n <= 1 << 62))));
                if mode == Mode::AllOrNothing {
                    assert!(never_fits(&cs, mode));
                    // Only peeks: the request is refused, the other
                    // descriptor is judged alone.
                    let r = interpret(
                        &p,
                        &cs,
                        &[vec![0, cap as i64, 2, -1, 1], vec![0, cap as i64, 2, -1, 1]],
                    )
                    .unwrap();
                    assert!(r.refused && r.charged.is_empty());
                    assert!(r.outcomes[0].over && !r.outcomes[1].over);
                } else {
                    let r = interpret(
                        &p,
                        &cs,
                        &[vec![0, cap as i64, 2, -1, 1], vec![0, cap as i64, 1, -1, 1]],
                    )
                    .unwrap();
                    assert!(r.outcomes[0].over && !r.outcomes[1].over);
                }
            }
        }
    }
}

#[test]
fn the_same_key_twice_is_one_limiter_with_the_hits_summed() {
    let l = limit("{unit: hour, requests_per_unit: 5}");
    let cs = [
        keyed(0, "a", l.clone(), 1),
        keyed(1, "b", l.clone(), 1),
        keyed(2, "a", l, 1),
    ];
    let p = plan(&cs, Mode::AllOrNothing);
    // "b" alone at quantity 1, "a" once at quantity 2.
    let alls: Vec<&Vec<String>> = p
        .commands
        .iter()
        .filter(|c| c[0] == "CL.THROTTLEALL")
        .collect();
    assert_eq!(alls.len(), 2);
    for c in &alls {
        assert_eq!(c[1], "1");
    }
    assert_eq!(alls[0][2], "a");
    assert_eq!(&alls[0][alls[0].len() - 2..], ["QUANTITY", "2"]);
    assert_eq!(alls[1][2], "b");
    // Allowed: both descriptors of "a" see the counts pass by their hits.
    let r = interpret(
        &p,
        &cs,
        &[
            vec![0, 5, 3, -1, 1, 1],
            vec![0, 5, 3, -1, 1],
            vec![0, 5, 4, -1, 1, 1],
            vec![0, 5, 4, -1, 1],
        ],
    )
    .unwrap();
    assert!(!r.refused);
    let o = &r.outcomes;
    assert_eq!((o[0].before, o[0].after, o[0].remaining), (0, 1, 3));
    assert_eq!((o[2].before, o[2].after, o[2].remaining), (1, 2, 3));
    assert_eq!(r.charged.len(), 2);
    // Refused: both over together.
    let r = interpret(
        &p,
        &cs,
        &[
            vec![1, 5, 1, 9, 9, 1],
            vec![0, 5, 1, -1, 1],
            vec![0, 5, 4, -1, 1, 1],
            vec![0, 5, 4, -1, 1],
        ],
    )
    .unwrap();
    assert!(r.refused);
    assert!(r.outcomes[0].over && r.outcomes[2].over && !r.outcomes[1].over);
    assert_eq!(r.charged.len(), 1);
    // The allowed call of "b" is given back.
    let u = undo(&cs, &r.charged);
    assert_eq!(
        u.commands,
        vec![vec!["FW.REFUND", "b", "5", "3600", "1", "ALIGN"]]
    );
    let back = interpret_undo(&u, &cs, &[vec![0, 5, 5, -1, 0]]).unwrap();
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].0, 1);
    assert!(!back[0].1.over);
    assert_eq!(back[0].1.remaining, 5);
    // The reference mode charges each, as the reference does.
    let p = plan(&cs, Mode::Reference);
    assert_eq!(p.commands.len(), 3);
}

#[test]
fn negative_hits_are_refunds() {
    let fw = limit("{unit: hour, requests_per_unit: 5}");
    let g = limit("{unit: second, requests_per_unit: 5, algorithm: gcra}");
    let sw = limit("{unit: minute, requests_per_unit: 3, algorithm: sliding_window}");
    let neg = |l: RateLimit, hits| Charge {
        negative: true,
        ..charge(0, l, hits)
    };
    let p = plan(&[neg(fw.clone(), 2)], Mode::Reference);
    assert_eq!(
        p.commands,
        vec![vec![
            "FW.REFUND",
            "k0",
            &C.to_string(),
            "3600",
            "2",
            "ALIGN"
        ]]
    );
    let r = interpret(&p, &[neg(fw.clone(), 2)], &[vec![0, C, C - 1, -1, 10]]).unwrap();
    let o = &r.outcomes[0];
    assert!(o.negative && !o.over);
    assert_eq!(o.remaining, 4);
    let p = plan(&[neg(fw, u64::MAX)], Mode::AllOrNothing);
    assert_eq!(
        p.commands,
        vec![vec![
            "FW.REFUND",
            "k0",
            "5",
            "3600",
            &C.to_string(),
            "ALIGN"
        ]]
    );
    let p = plan(&[neg(g, 1)], Mode::AllOrNothing);
    assert_eq!(
        p.commands,
        vec![vec!["CL.REFUND", "k0", "4", "5", "1", "1"]]
    );
    let p = plan(&[neg(sw, 1)], Mode::Reference);
    assert_eq!(p.commands, vec![vec!["SW.REFUND", "k0", "3", "60", "1"]]);
}

#[test]
fn a_call_takes_at_most_a_hundred_limiters() {
    let l = limit("{unit: hour, requests_per_unit: 5}");
    let cs: Vec<Charge> = (0..250).map(|i| charge(i, l.clone(), 1)).collect();
    let p = plan(&cs, Mode::AllOrNothing);
    let sizes: Vec<&str> = p
        .commands
        .iter()
        .filter(|c| c[0] == "CL.THROTTLEALL")
        .map(|c| c[1].as_str())
        .collect();
    assert_eq!(sizes, vec!["100", "100", "50"]);
    let mut replies = Vec::new();
    for c in &p.commands {
        replies.push(if c[0] == "CL.THROTTLEALL" {
            vec![i64::from(c[1] == "50"), 5, 4, -1, 1, 1]
        } else {
            vec![0, 5, 4, -1, 1]
        });
    }
    // The last call refused: the first two are held, to be given back.
    let r = interpret(&p, &cs, &replies).unwrap();
    assert!(r.refused);
    assert_eq!(r.charged.len(), 200);
    assert_eq!(undo(&cs, &r.charged).commands.len(), 200);
}

#[test]
fn a_refused_call_marks_its_binding_limiter_over_even_when_its_peek_fits() {
    // The module reads the clock per command: a limiter refused by a few
    // microseconds can fit by the time of the peek after it. The call's
    // binding index (its 6th integer) says which one refused.
    let cs = [
        charge(0, limit("{unit: second, requests_per_unit: 5}"), 1),
        charge(
            1,
            limit("{unit: second, requests_per_unit: 3, algorithm: gcra}"),
            1,
        ),
    ];
    let p = plan(&cs, Mode::AllOrNothing);
    let r = interpret(
        &p,
        &cs,
        &[
            vec![1, 3, 0, 1, 1, 2],
            vec![0, 5, 4, -1, 1],
            vec![0, 3, 1, -1, 1],
        ],
    )
    .unwrap();
    assert!(r.refused && r.charged.is_empty());
    assert!(!r.outcomes[0].over, "the first could take it alone");
    assert!(r.outcomes[1].over, "the binding limiter refused it");
    assert_eq!(r.outcomes[1].remaining, 0);
}

#[test]
fn a_request_of_many_descriptors_is_planned_in_linear_time() {
    // A 4 MB gRPC request holds hundreds of thousands of descriptors:
    // planning must not compare each with every other (minutes of a
    // runtime thread). Generous bound: the linear plan takes well under 1 s.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let l = limit("{unit: hour, requests_per_unit: 100000}");
        let cs: Vec<Charge> = (0..200_000u64)
            .map(|i| charge(i as usize, l.clone(), 1 + i % 50_000))
            .collect();
        let p = plan(&cs, Mode::AllOrNothing);
        let _ = tx.send(p.commands.len());
    });
    let n = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("planned within 60 s");
    // 200,000 peeks and one call per quantity per 100 limiters.
    assert_eq!(n, 200_000 + 50_000);
}

#[test]
fn the_reference_modes_descriptors_are_one_pipeline() {
    let l = limit("{unit: hour, requests_per_unit: 10}");
    let cs = [
        charge(0, l.clone(), 1),
        charge(1, l.clone(), 3),
        charge(2, l, 0),
    ];
    let p = plan(&cs, Mode::Reference);
    // One plan, sent as one pipeline (not a transaction), one counting
    // call per descriptor with its own hits (0 only looks).
    assert!(!p.atomic);
    let sent: Vec<(&str, &str, &str)> = p
        .commands
        .iter()
        .map(|c| (c[0].as_str(), c[4].as_str(), c[6].as_str()))
        .collect();
    assert_eq!(
        sent,
        vec![
            ("FW.INCR", "1", "COUNTALL"),
            ("FW.INCR", "3", "COUNTALL"),
            ("FW.INCR", "0", "COUNTALL")
        ]
    );
}

/// `never_fits` scans small requests without building `held`: the same
/// verdict as `held`'s, with keys named more than once (hits summed, the
/// smallest capacity), shadow and negative charges left out, past the
/// scan's size too.
#[test]
fn never_fits_sums_the_hits_of_a_key_against_its_smallest_limit() {
    let small = limit("{unit: second, requests_per_unit: 5}");
    let big = limit("{unit: second, requests_per_unit: 50}");
    let on = |i: usize, key: &str, l: &RateLimit, hits: u64| Charge {
        key: key.into(),
        ..charge(i, l.clone(), hits)
    };
    let mode = Mode::AllOrNothing;
    // 3 + 3 on a key whose smaller limit holds 5.
    let cs = [
        on(0, "a", &big, 3),
        on(1, "b", &big, 40),
        on(2, "a", &small, 3),
    ];
    assert!(never_fits(&cs, mode));
    let verdict = |cs: &[Charge]| {
        held(cs, &enforced(cs, mode))
            .iter()
            .any(|h| h.hits > cs[h.lead].limit.capacity())
    };
    assert!(verdict(&cs));
    // 2 + 3 fits; 40 + 20 on the big limit's own key does not.
    let cs = [on(0, "a", &big, 2), on(1, "a", &small, 3)];
    assert!(!never_fits(&cs, mode) && !verdict(&cs));
    let cs = [
        on(0, "b", &big, 40),
        on(1, "a", &small, 1),
        on(2, "b", &big, 20),
    ];
    assert!(never_fits(&cs, mode) && verdict(&cs));
    // A refund or a shadow charge takes nothing.
    let mut refund = on(1, "a", &small, 9);
    refund.negative = true;
    let mut shadow = on(2, "a", &small, 9);
    shadow.limit.shadow_mode = true;
    let cs = [on(0, "a", &small, 1), refund, shadow];
    assert!(!never_fits(&cs, mode) && !verdict(&cs));
    // Past the scan: the same verdicts through `held`.
    let many = |last: u64| -> Vec<Charge> {
        (0..40)
            .map(|i| on(i, &format!("k{}", i % 20), &big, 1))
            .chain([on(40, "k3", &small, last)])
            .collect()
    };
    // k3: 2 hits of the big limit's, then `last` of the small one's 5.
    assert!(!never_fits(&many(3), mode) && !verdict(&many(3)));
    assert!(never_fits(&many(4), mode) && verdict(&many(4)));
}
