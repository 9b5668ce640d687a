use super::*;

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::load(
        &[ConfigFile {
            name: "config.test".into(),
            text: text.into(),
        }],
        false,
    )
}

fn e(k: &str, v: &str) -> Entry {
    Entry {
        key: k.into(),
        value: v.into(),
    }
}

const BASIC: &str = r#"
domain: rl
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 5
  - key: path
    value: /login
    rate_limit:
      unit: minute
      requests_per_unit: 2
      name: login
  - key: path
    rate_limit:
      unit: hour
      requests_per_unit: 100
  - key: user
    descriptors:
      - key: plan
        value: free
        rate_limit: {unit: day, requests_per_unit: 10}
  - key: file
    value: doc*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: internal
    rate_limit: {unlimited: true}
"#;

#[test]
fn key_and_value_before_key_only() {
    let c = load(BASIC).unwrap();
    let l = c.get_limit("rl", &[e("path", "/login")], None).unwrap();
    assert_eq!((l.requests_per_unit, l.unit), (2, Some(Unit::Minute)));
    assert_eq!(l.full_key, "rl.path_/login");
    let l = c.get_limit("rl", &[e("path", "/other")], None).unwrap();
    assert_eq!((l.requests_per_unit, l.unit), (100, Some(Unit::Hour)));
    assert_eq!(l.full_key, "rl.path");
}

#[test]
fn depth_must_match() {
    let c = load(BASIC).unwrap();
    assert!(c.get_limit("rl", &[e("user", "u1")], None).is_none());
    let l = c
        .get_limit("rl", &[e("user", "u1"), e("plan", "free")], None)
        .unwrap();
    assert_eq!(l.requests_per_unit, 10);
    assert_eq!(l.full_key, "rl.user.plan_free");
    assert!(c
        .get_limit("rl", &[e("remote_address", "1.2.3.4"), e("x", "y")], None)
        .is_none());
    assert!(c.get_limit("other", &[e("path", "/login")], None).is_none());
    assert!(c.get_limit("rl", &[e("nothing", "x")], None).is_none());
}

#[test]
fn wildcards_and_share_threshold() {
    let c = load(BASIC).unwrap();
    let l = c.get_limit("rl", &[e("file", "docs.pdf")], None).unwrap();
    assert_eq!(l.requests_per_unit, 3);
    assert_eq!(l.share_threshold_pattern, Some(vec!["doc*".to_string()]));
    assert_eq!(l.full_key, "rl.file_doc*");
    assert!(c.get_limit("rl", &[e("file", "image.png")], None).is_none());
    let parts: Vec<String> = "a*b*c".split('*').map(String::from).collect();
    assert!(wildcard_match(&parts, "abc"));
    assert!(wildcard_match(&parts, "a-x-b-y-c"));
    assert!(!wildcard_match(&parts, "a-c-b"));
}

#[test]
fn unlimited_and_override() {
    let c = load(BASIC).unwrap();
    let l = c.get_limit("rl", &[e("internal", "x")], None).unwrap();
    assert!(l.unlimited);
    let o = Override {
        requests_per_unit: 42,
        unit: 3,
    };
    let l = c.get_limit("rl", &[e("anything", "v")], Some(o)).unwrap();
    assert_eq!((l.requests_per_unit, l.unit), (42, Some(Unit::Hour)));
    assert_eq!(l.full_key, "rl.anything_v");
    assert!(!l.shadow_mode && l.is_override);
    // An override still needs a known domain.
    assert!(c.get_limit("nope", &[e("a", "b")], Some(o)).is_none());
}

#[test]
fn detailed_metric_and_value_to_metric() {
    let c = load(
        "domain: d\ndescriptors:\n  - key: k\n    detailed_metric: true\n    rate_limit: {unit: second, requests_per_unit: 1}\n  - key: v\n    value_to_metric: true\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
    )
    .unwrap();
    assert_eq!(
        c.get_limit("d", &[e("k", "abc")], None).unwrap().full_key,
        "d.k_abc"
    );
    assert_eq!(
        c.get_limit("d", &[e("v", "xyz")], None).unwrap().full_key,
        "d.v_xyz"
    );
}

fn error_of(text: &str) -> String {
    load(text).unwrap_err().0
}

#[test]
fn validation_errors_word_for_word() {
    assert_eq!(
        error_of("domain: ''\n"),
        "config.test: config file cannot have empty domain"
    );
    assert_eq!(
        error_of("domain: d\ndescriptors:\n  - value: v\n"),
        "config.test: descriptor has empty key"
    );
    assert_eq!(
        error_of("domain: d\ndescriptors:\n  - key: k\n  - key: k\n"),
        "config.test: duplicate descriptor composite key 'd.k'"
    );
    assert_eq!(
        error_of("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"),
        "config.test: invalid rate limit unit 'fortnight'"
    );
    assert_eq!(
        error_of("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, unlimited: true}\n"),
        "config.test: should not specify rate limit unit when unlimited"
    );
    assert_eq!(
        error_of("domain: d\ndescriptors:\n  - key: k\n    rate_limt: {}\n"),
        "config.test: config error, unknown key 'rate_limt'"
    );
    assert_eq!(
        error_of("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, name: a, replaces: [{name: a}]}\n"),
        "config.test: replaces should not contain name of same descriptor"
    );
    assert_eq!(
        error_of("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: ''}]}\n"),
        "config.test: should not have an empty replaces entry"
    );
    assert_eq!(
        error_of("domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n"),
        "config.test: share_threshold can only be used with wildcard values (containing '*'), but found key 'k_v'"
    );
    assert_eq!(
        error_of("domain: d\ndescriptors:\n  - 5\n"),
        "config.test: config error, yaml file contains list of type other than map: 5"
    );
    assert_eq!(
        error_of("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1.5}\n"),
        "config.test: error checking config"
    );
    assert!(error_of("domain: [unclosed\n").starts_with("config.test: error loading config file: "));
}

#[test]
fn duplicate_domains_and_merge() {
    let files = vec![
        ConfigFile {
            name: "config.a".into(),
            text: "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n".into(),
        },
        ConfigFile {
            name: "config.b".into(),
            text: "domain: d\ndescriptors:\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 2}\n".into(),
        },
    ];
    assert_eq!(
        Config::load(&files, false).unwrap_err().0,
        "config.b: duplicate domain 'd' in config file"
    );
    let c = Config::load(&files, true).unwrap();
    assert_eq!(
        c.get_limit("d", &[e("b", "x")], None)
            .unwrap()
            .requests_per_unit,
        2
    );
    assert_eq!(
        c.get_limit("d", &[e("a", "x")], None)
            .unwrap()
            .requests_per_unit,
        1
    );
}

#[test]
fn reference_example_keys_load() {
    // quota_mode and metadata appear in the reference's own example.yaml.
    let c = load("domain: d\ndescriptors:\n  - key: k\n    quota_mode: true\n    metadata: {team: x, tags: [a, b], n: 1.5}\n    rate_limit: {unit: day, requests_per_unit: 10}\n").unwrap();
    let l = c.get_limit("d", &[e("k", "v")], None).unwrap();
    assert!(l.quota_mode);
    // Kept for RESPONSE_DYNAMIC_METADATA, numbers as JSON numbers.
    assert_eq!(
        serde_json::Value::Object((*l.metadata.unwrap()).clone()),
        serde_json::json!({"team": "x", "tags": ["a", "b"], "n": 1.5})
    );
    // An override carries none; nor does an empty map.
    let o = Override {
        requests_per_unit: 1,
        unit: 1,
    };
    assert_eq!(
        c.get_limit("d", &[e("k", "v")], Some(o)).unwrap().metadata,
        None
    );
    let c = load("domain: d\ndescriptors:\n  - key: k\n    metadata: {}\n    rate_limit: {unit: day, requests_per_unit: 10}\n").unwrap();
    assert_eq!(
        c.get_limit("d", &[e("k", "v")], None).unwrap().metadata,
        None
    );
    // A map whose key is a list has no JSON (nor protobuf Struct) form.
    let text = error_of("domain: d\ndescriptors:\n  - key: k\n    metadata: {[a]: 1}\n    rate_limit: {unit: day, requests_per_unit: 10}\n");
    assert!(text.contains(": error parsing metadata: "), "{text}");
    assert_eq!(
        error_of("domain: d\ndescriptors:\n  - key: k\n    metadata: [a]\n"),
        "config.test: error loading config file: cannot unmarshal - a into map (key 'metadata')"
    );
}

#[test]
fn extensions() {
    let c = load("domain: d\ndescriptors:\n  - key: g\n    rate_limit: {unit: second, requests_per_unit: 10, algorithm: gcra, burst: 20}\n  - key: s\n    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_window, unit_multiplier: 5}\n").unwrap();
    let g = c.get_limit("d", &[e("g", "1")], None).unwrap();
    assert_eq!((g.algorithm, g.burst), (Algorithm::Gcra, Some(20)));
    let s = c.get_limit("d", &[e("s", "1")], None).unwrap();
    assert_eq!(
        (s.algorithm, s.window_seconds()),
        (Algorithm::SlidingWindow, 300)
    );
    assert_eq!(
        error_of("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: leaky}\n"),
        "config.test: invalid rate limit algorithm 'leaky': expected fixed_window, sliding_window or gcra"
    );
    assert_eq!(
        error_of("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, burst: 3}\n"),
        "config.test: burst needs algorithm: gcra"
    );
    assert_eq!(
        error_of("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, unit_multiplier: 0}\n"),
        "config.test: unit_multiplier must be 1 or greater"
    );
}

fn rule(algorithm: &str, unit: Unit, mult: u64, rpu: u64, burst: Option<u64>) -> String {
    let burst = burst.map(|b| format!(", burst: {b}")).unwrap_or_default();
    format!(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {{unit: {}, unit_multiplier: {mult}, requests_per_unit: {rpu}, algorithm: {algorithm}{burst}}}\n",
        unit.name().to_lowercase()
    )
}

const UNITS: [Unit; 7] = [
    Unit::Second,
    Unit::Minute,
    Unit::Hour,
    Unit::Day,
    Unit::Week,
    Unit::Month,
    Unit::Year,
];

#[test]
fn the_module_bounds_every_window() {
    assert_eq!(MAX_WINDOW_SECS, 5_120_927_236);
    for algorithm in ["fixed_window", "sliding_window", "gcra"] {
        for unit in UNITS {
            let most = (MAX_WINDOW_SECS / unit.seconds()).min(u64::from(u32::MAX));
            let ok = load(&rule(algorithm, unit, most, 1, None));
            assert!(ok.is_ok(), "{algorithm} {unit:?} x{most}: {ok:?}");
            if most < u64::from(u32::MAX) {
                assert_eq!(
                    error_of(&rule(algorithm, unit, most + 1, 1, None)),
                    format!(
                        "config.test: unit_multiplier {} is out of range for unit {}: a window is at most 5120927236 seconds",
                        most + 1,
                        unit.name()
                    ),
                    "{algorithm} {unit:?}"
                );
            }
        }
    }
    // The issue's rule: a window of 4294967295 minutes.
    assert!(
        error_of(&rule("fixed_window", Unit::Minute, 4_294_967_295, 5, None))
            .contains("unit_multiplier 4294967295 is out of range for unit MINUTE")
    );
    // A second is the one unit every multiplier fits.
    assert!(load(&rule(
        "sliding_window",
        Unit::Second,
        4_294_967_295,
        5,
        None
    ))
    .is_ok());
}

#[test]
fn the_module_bounds_gcra_rates_and_buckets() {
    // At most one request per nanosecond: only windows under 2^32 ns bind.
    for mult in 1..=4u64 {
        let period = mult * 1_000_000_000;
        assert!(load(&rule("gcra", Unit::Second, mult, period, None)).is_ok());
        assert_eq!(
            error_of(&rule("gcra", Unit::Second, mult, period + 1, None)),
            format!(
                "config.test: algorithm gcra with requests_per_unit {} is out of range for a window of {mult} seconds: at most {period} (one request per nanosecond)",
                period + 1
            )
        );
    }
    assert!(load(&rule("gcra", Unit::Second, 5, u64::from(u32::MAX), None)).is_ok());
    assert!(load(&rule("gcra", Unit::Minute, 1, u64::from(u32::MAX), None)).is_ok());
    // The issue's rule.
    assert!(
        error_of(&rule("gcra", Unit::Second, 1, 4_294_967_295, None))
            .contains("requests_per_unit 4294967295 is out of range")
    );
    // The bucket empties within the span: burst at most span / T - 1.
    for unit in UNITS {
        for (mult, rpu) in [(1u64, 1u64), (1, 7), (3, 1000), (1, 4_294_967_295)] {
            let period = unit.seconds() * mult * 1_000_000_000;
            let t = gcra_emission_nanos(period, rpu);
            if t == 0 {
                continue;
            }
            let most = MAX_SPAN_NANOS / t - 1;
            if most > u64::from(u32::MAX) {
                assert!(load(&rule("gcra", unit, mult, rpu, Some(u64::from(u32::MAX)))).is_ok());
                continue;
            }
            assert!(
                load(&rule("gcra", unit, mult, rpu, Some(most))).is_ok(),
                "{unit:?} x{mult} rpu {rpu} burst {most}"
            );
            assert_eq!(
                error_of(&rule("gcra", unit, mult, rpu, Some(most + 1))),
                format!(
                    "config.test: burst {} is out of range for requests_per_unit {rpu} per {} seconds: the bucket must empty within 5120927236 seconds, so burst is at most {most}",
                    most + 1,
                    unit.seconds() * mult
                )
            );
        }
    }
    // The default burst (requests_per_unit - 1) always fits its window.
    for unit in UNITS {
        let most = (MAX_WINDOW_SECS / unit.seconds()).min(u64::from(u32::MAX));
        assert!(load(&rule("gcra", unit, most, 1, None)).is_ok());
        assert!(load(&rule("gcra", unit, most, 4_294_967_295, None)).is_ok());
    }
}

#[test]
fn unlimited_rules_have_no_window_to_bound() {
    assert!(load("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit_multiplier: 4294967295}\n").is_ok());
}

#[test]
fn burst_zero_is_a_bucket_of_one() {
    // `burst` is CL.THROTTLE's max_burst: 0 is a bucket of one request,
    // not "unset" (which is requests_per_unit - 1).
    let c = load("domain: d\ndescriptors:\n  - key: z\n    rate_limit: {unit: second, requests_per_unit: 10, algorithm: gcra, burst: 0}\n  - key: u\n    rate_limit: {unit: second, requests_per_unit: 10, algorithm: gcra}\n").unwrap();
    let z = c
        .get_limit(
            "d",
            &[Entry {
                key: "z".into(),
                value: "v".into(),
            }],
            None,
        )
        .unwrap();
    let u = c
        .get_limit(
            "d",
            &[Entry {
                key: "u".into(),
                value: "v".into(),
            }],
            None,
        )
        .unwrap();
    assert_eq!((z.max_burst(), z.capacity()), (0, 1));
    assert_eq!((u.max_burst(), u.capacity()), (9, 10));
}

#[test]
fn a_rule_names_a_policy() {
    let c = load("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 10, policy: d.login-1_x}\n  - key: plain\n    rate_limit: {unit: minute, requests_per_unit: 10}\n").unwrap();
    let l = c.get_limit("d", &[e("k", "v")], None).unwrap();
    assert_eq!(l.policy.as_deref(), Some("d.login-1_x"));
    // Still a rule the reference can express: the key and window are its own.
    assert!(!l.is_extended());
    assert_eq!(
        c.get_limit("d", &[e("plain", "v")], None).unwrap().policy,
        None
    );
    // A request's override is its own limit, never a policy's.
    let o = c.get_limit(
        "d",
        &[e("k", "v")],
        Some(Override {
            requests_per_unit: 3,
            unit: 2,
        }),
    );
    assert_eq!(o.unwrap().policy, None);
    assert!(c
        .dump()
        .contains("d.k: unit=MINUTE requests_per_unit=10, shadow_mode: false, quota_mode: false, policy: d.login-1_x\n"));
    let bad = |p: &str| {
        error_of(&format!(
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {{unit: minute, requests_per_unit: 1, policy: {p}}}\n"
        ))
    };
    assert_eq!(
        bad("'a b'"),
        "config.test: invalid policy name 'a b': 1 to 64 bytes of letters, digits, '_', '.' and '-'"
    );
    assert_eq!(
        bad("''"),
        "config.test: invalid policy name '': 1 to 64 bytes of letters, digits, '_', '.' and '-'"
    );
    assert_eq!(
        bad("'api:sec'"),
        "config.test: invalid policy name 'api:sec': 1 to 64 bytes of letters, digits, '_', '.' and '-'"
    );
    let long = "p".repeat(65);
    assert!(bad(&long).starts_with("config.test: invalid policy name 'ppp"));
    assert!(load(&format!(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {{unit: minute, requests_per_unit: 1, policy: {}}}\n",
        "p".repeat(64)
    ))
    .is_ok());
    assert_eq!(
        error_of(
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, policy: p}\n"
        ),
        "config.test: should not specify a policy when unlimited"
    );
}

#[test]
fn the_policies_rules_name() {
    let c = load("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 1, policy: p2}\n  - key: b\n    descriptors:\n      - key: c\n        rate_limit: {unit: minute, requests_per_unit: 1, policy: p1}\n  - key: e\n    rate_limit: {unit: minute, requests_per_unit: 1, policy: p2}\n  - key: f\n    rate_limit: {unit: minute, requests_per_unit: 1}\n").unwrap();
    assert_eq!(c.policies(), vec!["p1".to_string(), "p2".to_string()]);
    assert!(load("domain: d\n").unwrap().policies().is_empty());
}
