//! `RESPONSE_DYNAMIC_METADATA`: the response's `dynamic_metadata`, as the
//! reference's `ratelimitToMetadata` fills it: the request's `domain`, its
//! `descriptors` (each with its `entries` as `key=value`, its `limit`
//! override as text and its `hitsAddend` when set), the request's
//! `hitsAddend` when not zero, and the configured `metadata` of the
//! descriptors that passed, merged. Pure.

use std::collections::HashMap;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor::RateLimitOverride, RateLimitDescriptor,
};
use envoy_types::pb::envoy::r#type::v3::RateLimitUnit;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::google::protobuf::{value::Kind, ListValue, NullValue, Struct, Value};
use serde_json::{Map, Value as Json};

fn string(s: String) -> Value {
    Value {
        kind: Some(Kind::StringValue(s)),
    }
}

fn number(n: f64) -> Value {
    Value {
        kind: Some(Kind::NumberValue(n)),
    }
}

fn list(values: Vec<Value>) -> Value {
    Value {
        kind: Some(Kind::ListValue(ListValue { values })),
    }
}

/// A limit override as Go's protobuf `String()` writes it on one line:
/// `requests_per_unit:10 unit:MINUTE`, fields at their zero value left out.
pub fn override_text(o: &RateLimitOverride) -> String {
    let mut parts = Vec::new();
    if o.requests_per_unit != 0 {
        parts.push(format!("requests_per_unit:{}", o.requests_per_unit));
    }
    if o.unit != 0 {
        let unit = RateLimitUnit::try_from(o.unit)
            .map(|u| u.as_str_name().to_string())
            .unwrap_or_else(|_| o.unit.to_string());
        parts.push(format!("unit:{unit}"));
    }
    parts.join(" ")
}

fn descriptor(d: &RateLimitDescriptor) -> Value {
    let mut fields = HashMap::new();
    let entries = d
        .entries
        .iter()
        .map(|e| string(format!("{}={}", e.key, e.value)))
        .collect();
    fields.insert("entries".to_string(), list(entries));
    if let Some(o) = &d.limit {
        fields.insert("limit".to_string(), string(override_text(o)));
    }
    if let Some(h) = &d.hits_addend {
        // A double, as protobuf's Struct holds numbers.
        fields.insert("hitsAddend".to_string(), number(h.value as f64));
    }
    Value {
        kind: Some(Kind::StructValue(Struct {
            fields: fields.into_iter().collect(),
        })),
    }
}

/// A configured value as protobuf's `Value` (numbers as doubles).
fn from_json(v: &Json) -> Value {
    let kind = match v {
        Json::Null => Kind::NullValue(NullValue::NullValue as i32),
        Json::Bool(b) => Kind::BoolValue(*b),
        Json::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(f64::NAN)),
        Json::String(s) => Kind::StringValue(s.clone()),
        Json::Array(items) => Kind::ListValue(ListValue {
            values: items.iter().map(from_json).collect(),
        }),
        Json::Object(m) => Kind::StructValue(Struct {
            fields: m.iter().map(|(k, v)| (k.clone(), from_json(v))).collect(),
        }),
    };
    Value { kind: Some(kind) }
}

/// A `Value` in proto3 JSON, as `/json` answers it (a whole number
/// without a fraction, as Go's protojson writes it).
pub fn to_json(v: &Value) -> Json {
    match &v.kind {
        None | Some(Kind::NullValue(_)) => Json::Null,
        Some(Kind::BoolValue(b)) => Json::Bool(*b),
        Some(Kind::NumberValue(n)) if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 => {
            Json::from(*n as i64)
        }
        Some(Kind::NumberValue(n)) => Json::from(*n),
        Some(Kind::StringValue(s)) => Json::String(s.clone()),
        Some(Kind::ListValue(l)) => Json::Array(l.values.iter().map(to_json).collect()),
        Some(Kind::StructValue(s)) => struct_to_json(s),
    }
}

/// A `Struct` in proto3 JSON (see [`to_json`]).
pub fn struct_to_json(s: &Struct) -> Json {
    Json::Object(
        s.fields
            .iter()
            .map(|(k, v)| (k.clone(), to_json(v)))
            .collect(),
    )
}

/// Merges `src` into `dest` as the reference's `mergeMetadata` does: a key
/// `dest` has keeps its value, unless both are maps, which merge in turn.
pub fn merge(dest: &mut Map<String, Json>, src: &Map<String, Json>) {
    for (k, v) in src {
        match (dest.get_mut(k), v) {
            (Some(Json::Object(d)), Json::Object(s)) => merge(d, s),
            (Some(_), _) => {}
            (None, _) => {
                dest.insert(k.clone(), v.clone());
            }
        }
    }
}

/// The `dynamic_metadata` of a decided request; `passed`: the configured
/// metadata of its descriptors that were not over their limit (nor
/// unlimited), in the request's order.
pub fn of_request(req: &RateLimitRequest, passed: &[&Map<String, Json>]) -> Struct {
    let mut fields = HashMap::new();
    fields.insert("domain".to_string(), string(req.domain.clone()));
    fields.insert(
        "descriptors".to_string(),
        list(req.descriptors.iter().map(descriptor).collect()),
    );
    if req.hits_addend != 0 {
        fields.insert("hitsAddend".to_string(), number(f64::from(req.hits_addend)));
    }
    let mut merged = Map::new();
    for m in passed {
        merge(&mut merged, m);
    }
    if !merged.is_empty() {
        fields.insert("metadata".to_string(), from_json(&Json::Object(merged)));
    }
    Struct {
        fields: fields.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
    use envoy_types::pb::google::protobuf::UInt64Value;

    fn field<'a>(s: &'a Struct, name: &str) -> &'a Kind {
        s.fields[name].kind.as_ref().unwrap()
    }

    #[test]
    fn domain_descriptors_and_hits_as_the_reference_writes_them() {
        let req = RateLimitRequest {
            domain: "d".into(),
            descriptors: vec![
                RateLimitDescriptor {
                    entries: vec![
                        Entry {
                            key: "k".into(),
                            value: "v".into(),
                        },
                        Entry {
                            key: "path".into(),
                            value: "/a=b".into(),
                        },
                    ],
                    limit: Some(RateLimitOverride {
                        requests_per_unit: 7,
                        unit: RateLimitUnit::Minute as i32,
                    }),
                    hits_addend: Some(UInt64Value { value: 0 }),
                    ..Default::default()
                },
                RateLimitDescriptor::default(),
            ],
            hits_addend: 3,
        };
        let m = of_request(&req, &[]);
        assert_eq!(field(&m, "domain"), &Kind::StringValue("d".into()));
        assert_eq!(field(&m, "hitsAddend"), &Kind::NumberValue(3.0));
        let Kind::ListValue(ds) = field(&m, "descriptors") else {
            panic!("descriptors: {m:?}");
        };
        assert_eq!(ds.values.len(), 2);
        let Some(Kind::StructValue(first)) = &ds.values[0].kind else {
            panic!("{ds:?}");
        };
        assert_eq!(
            field(first, "entries"),
            &Kind::ListValue(ListValue {
                values: vec![string("k=v".into()), string("path=/a=b".into())]
            })
        );
        assert_eq!(
            field(first, "limit"),
            &Kind::StringValue("requests_per_unit:7 unit:MINUTE".into())
        );
        // Set to 0 is set: written, as the reference writes a present wrapper.
        assert_eq!(field(first, "hitsAddend"), &Kind::NumberValue(0.0));
        let Some(Kind::StructValue(second)) = &ds.values[1].kind else {
            panic!("{ds:?}");
        };
        assert_eq!(second.fields.len(), 1, "only its (empty) entries");
        // No request hits: no field.
        let m = of_request(
            &RateLimitRequest {
                hits_addend: 0,
                ..req
            },
            &[],
        );
        assert!(!m.fields.contains_key("hitsAddend"));
        assert!(!m.fields.contains_key("metadata"), "none passed: none");
    }

    #[test]
    fn passed_metadata_merges_first_value_first() {
        let map = |v: Json| match v {
            Json::Object(m) => m,
            _ => unreachable!(),
        };
        let a = map(serde_json::json!({"team": "a", "labels": {"x": 1, "y": [true, null]}}));
        let b = map(serde_json::json!({"team": "b", "labels": {"x": 2, "z": "s"}, "n": 1.5}));
        let m = of_request(&RateLimitRequest::default(), &[&a, &b]);
        let Some(Kind::StructValue(got)) = m.fields["metadata"].kind.clone() else {
            panic!("{m:?}");
        };
        let want = from_json(&serde_json::json!({
            "team": "a",
            "labels": {"x": 1, "y": [true, null], "z": "s"},
            "n": 1.5
        }));
        assert_eq!(Some(Kind::StructValue(got)), want.kind);
    }

    #[test]
    fn proto3_json_as_protojson_writes_it() {
        let v = serde_json::json!({"a": [1, 1.5, "s", true, null], "b": {"c": -3}});
        assert_eq!(to_json(&from_json(&v)), v);
        let m = of_request(
            &RateLimitRequest {
                domain: "d".into(),
                hits_addend: 2,
                ..Default::default()
            },
            &[],
        );
        assert_eq!(
            struct_to_json(&m),
            serde_json::json!({"domain": "d", "descriptors": [], "hitsAddend": 2})
        );
    }

    #[test]
    fn overrides_leave_out_zero_fields() {
        let o = |requests_per_unit, unit| RateLimitOverride {
            requests_per_unit,
            unit,
        };
        assert_eq!(override_text(&o(0, 0)), "");
        assert_eq!(override_text(&o(5, 0)), "requests_per_unit:5");
        assert_eq!(override_text(&o(0, 1)), "unit:SECOND");
        assert_eq!(override_text(&o(1, 99)), "requests_per_unit:1 unit:99");
    }
}
