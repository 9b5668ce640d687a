use super::*;
use crate::config::{Config, ConfigFile};

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
    }
}

#[test]
fn reference_mode_counts_every_hit() {
    let cs = [charge(0, limit("{unit: second, requests_per_unit: 5}"), 2)];
    let p = plan(&cs, Mode::Reference);
    assert!(!p.atomic);
    assert_eq!(
        p.commands,
        vec![vec![
            "FW.INCR",
            "k0",
            &COUNTING_LIMIT.to_string(),
            "1",
            "2",
            "ALIGN"
        ]]
    );
    // The counter reads 7 after the increment: over, 2 over the limit.
    let o = interpret(
        &p,
        &cs,
        &[vec![0, COUNTING_LIMIT, COUNTING_LIMIT - 7, -1, 1]],
    )
    .unwrap();
    assert_eq!(
        o[0],
        Outcome {
            index: 0,
            over: true,
            before: 5,
            after: 7,
            remaining: 0,
            capacity: 5,
            reset_secs: None
        }
    );
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
    .unwrap();
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
    let o = interpret(&p, &cs, &[vec![0, 2, 0, -1, 1], vec![0, 2, 0, -1, 1]]).unwrap();
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
