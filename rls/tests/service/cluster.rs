//! A three-master Redis Cluster started by the test: the reference's keys
//! spread over the slots; all-or-nothing requests use the domain's hash tag
//! so that one CL.THROTTLEALL covers their keys.

use crate::support::*;

const CONFIG: &str = r#"
domain: c
descriptors:
  - key: a
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: b
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: g
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1, algorithm: gcra}
"#;

fn cluster() -> Vec<Redis> {
    Redis::cluster()
}

fn total(nodes: &[Redis], key: &str) -> i64 {
    // The key lives on one node; the others answer MOVED (not an integer).
    nodes
        .iter()
        .filter_map(|n| {
            let r = n.cmd(&["GET", key]);
            r.starts_with('$')
                .then(|| r.lines().nth(1).and_then(|l| l.trim().parse::<i64>().ok()))
                .flatten()
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_masters() {
    not_near_hour_end();
    let nodes = cluster();
    let seeds = nodes.iter().map(|n| n.url()).collect::<Vec<_>>().join(",");
    let window = hour();

    // Reference mode: each descriptor's key on its own slot's node.
    let rls = Rls::start(&seeds, &[("c.yaml", CONFIG)], &[("REDIS_TYPE", "cluster")]);
    let mut c = rls.client().await;
    let u = unique("u");
    let got = overall_codes(
        &mut c,
        &request("c", vec![desc(&[("a", &u)]), desc(&[("b", &u)])]),
        3,
    )
    .await;
    assert_eq!(got, vec![OK, OK, OVER]);
    assert_eq!(total(&nodes, &format!("c_a_{u}_{window}")), 3);
    assert_eq!(total(&nodes, &format!("c_b_{u}_{window}")), 3);
    // A shadow GCRA rule beside them: its peek and SHADOW call go together.
    for _ in 0..2 {
        let r = call(
            &mut c,
            request("c", vec![desc(&[("b", &u)]), desc(&[("g", &u)])]),
        )
        .await;
        assert_eq!(r.overall_code, OK);
    }
    assert_eq!(
        rls.metric("ratelimit_service_rate_limit_shadow_mode{domain=\"c\",key1=\"g\"}"),
        1
    );
    drop(c);
    drop(rls);

    // All-or-nothing: one slot per domain ({c}), refused requests charge nothing.
    let rls = Rls::start(
        &seeds,
        &[("c.yaml", CONFIG)],
        &[("REDIS_TYPE", "CLUSTER"), ("ALL_OR_NOTHING", "true")],
    );
    let mut c = rls.client().await;
    let v = unique("v");
    let got = overall_codes(
        &mut c,
        &request("c", vec![desc(&[("a", &v)]), desc(&[("b", &v)])]),
        3,
    )
    .await;
    assert_eq!(got, vec![OK, OK, OVER]);
    assert_eq!(total(&nodes, &format!("{{c}}c_a_{v}_{window}")), 2);
    assert_eq!(total(&nodes, &format!("{{c}}c_b_{v}_{window}")), 2);
}
