//! The messages of `ratelimit.config.ratelimit.v3` (envoyproxy/ratelimit's
//! `rls_conf.proto`), which an xDS server sends as
//! `type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig`,
//! and their conversion to the YAML the file loader reads.

use envoy_types::pb::google::protobuf::{value::Kind, Struct, Value as PbValue};
use serde_yaml::{Mapping, Value};

/// The resource type the service asks for.
pub const TYPE_URL: &str = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RateLimitConfig {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub domain: String,
    #[prost(message, repeated, tag = "3")]
    pub descriptors: Vec<RateLimitDescriptor>,
}

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RateLimitDescriptor {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
    #[prost(message, optional, tag = "3")]
    pub rate_limit: Option<RateLimitPolicy>,
    #[prost(message, repeated, tag = "4")]
    pub descriptors: Vec<RateLimitDescriptor>,
    #[prost(bool, tag = "5")]
    pub shadow_mode: bool,
    #[prost(bool, tag = "6")]
    pub detailed_metric: bool,
    #[prost(bool, tag = "7")]
    pub quota_mode: bool,
    #[prost(message, optional, tag = "8")]
    pub metadata: Option<Struct>,
}

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RateLimitPolicy {
    #[prost(enumeration = "RateLimitUnit", tag = "1")]
    pub unit: i32,
    #[prost(uint32, tag = "2")]
    pub requests_per_unit: u32,
    #[prost(bool, tag = "3")]
    pub unlimited: bool,
    #[prost(string, tag = "4")]
    pub name: String,
    #[prost(message, repeated, tag = "5")]
    pub replaces: Vec<RateLimitReplace>,
}

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RateLimitReplace {
    #[prost(string, tag = "1")]
    pub name: String,
}

/// The protocol's numbers: WEEK came after MONTH and YEAR.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum RateLimitUnit {
    Unknown = 0,
    Second = 1,
    Minute = 2,
    Hour = 3,
    Day = 4,
    Week = 7,
    Month = 5,
    Year = 6,
}

impl prost::Name for RateLimitConfig {
    const NAME: &'static str = "RateLimitConfig";
    const PACKAGE: &'static str = "ratelimit.config.ratelimit.v3";
    fn type_url() -> String {
        TYPE_URL.into()
    }
}

/// The unit's name as the reference writes it into the YAML (`UNKNOWN` for
/// 0; a number the enum does not know stays a number, which the loader
/// then refuses as an invalid unit).
fn unit_name(v: i32) -> String {
    match RateLimitUnit::try_from(v) {
        Ok(RateLimitUnit::Unknown) => "UNKNOWN".into(),
        Ok(RateLimitUnit::Second) => "SECOND".into(),
        Ok(RateLimitUnit::Minute) => "MINUTE".into(),
        Ok(RateLimitUnit::Hour) => "HOUR".into(),
        Ok(RateLimitUnit::Day) => "DAY".into(),
        Ok(RateLimitUnit::Week) => "WEEK".into(),
        Ok(RateLimitUnit::Month) => "MONTH".into(),
        Ok(RateLimitUnit::Year) => "YEAR".into(),
        Err(_) => v.to_string(),
    }
}

fn s(v: &str) -> Value {
    Value::String(v.to_string())
}

fn struct_to_yaml(st: &Struct) -> Value {
    let mut fields: Vec<_> = st.fields.iter().collect();
    fields.sort_by(|a, b| a.0.cmp(b.0));
    let mut m = Mapping::new();
    for (k, v) in fields {
        m.insert(s(k), value_to_yaml(v));
    }
    Value::Mapping(m)
}

fn value_to_yaml(v: &PbValue) -> Value {
    match &v.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::NumberValue(n)) => Value::Number((*n).into()),
        Some(Kind::StringValue(t)) => s(t),
        Some(Kind::BoolValue(b)) => Value::Bool(*b),
        Some(Kind::StructValue(st)) => struct_to_yaml(st),
        Some(Kind::ListValue(l)) => Value::Sequence(l.values.iter().map(value_to_yaml).collect()),
    }
}

fn descriptor_to_yaml(d: &RateLimitDescriptor) -> Value {
    let mut m = Mapping::new();
    m.insert(s("key"), s(&d.key));
    m.insert(s("value"), s(&d.value));
    if let Some(p) = &d.rate_limit {
        let mut r = Mapping::new();
        r.insert(s("unit"), s(&unit_name(p.unit)));
        r.insert(
            s("requests_per_unit"),
            Value::Number(p.requests_per_unit.into()),
        );
        r.insert(s("unlimited"), Value::Bool(p.unlimited));
        r.insert(s("name"), s(&p.name));
        let replaces = p
            .replaces
            .iter()
            .map(|x| {
                let mut e = Mapping::new();
                e.insert(s("name"), s(&x.name));
                Value::Mapping(e)
            })
            .collect();
        r.insert(s("replaces"), Value::Sequence(replaces));
        m.insert(s("rate_limit"), Value::Mapping(r));
    }
    m.insert(
        s("descriptors"),
        Value::Sequence(d.descriptors.iter().map(descriptor_to_yaml).collect()),
    );
    m.insert(s("shadow_mode"), Value::Bool(d.shadow_mode));
    m.insert(s("detailed_metric"), Value::Bool(d.detailed_metric));
    m.insert(s("quota_mode"), Value::Bool(d.quota_mode));
    if let Some(md) = &d.metadata {
        m.insert(s("metadata"), struct_to_yaml(md));
    }
    Value::Mapping(m)
}

/// The YAML text of one config, as the reference converts it
/// (`ConfigXdsProtoToYaml`): `domain` and `descriptors`, every field the
/// proto has, so the file loader validates it as it would a file.
pub fn to_yaml(c: &RateLimitConfig) -> Result<String, String> {
    let mut root = Mapping::new();
    root.insert(s("domain"), s(&c.domain));
    root.insert(
        s("descriptors"),
        Value::Sequence(c.descriptors.iter().map(descriptor_to_yaml).collect()),
    );
    serde_yaml::to_string(&Value::Mapping(root)).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn units_keep_the_protocols_numbers() {
        assert_eq!(unit_name(7), "WEEK");
        assert_eq!(unit_name(5), "MONTH");
        assert_eq!(unit_name(6), "YEAR");
        assert_eq!(unit_name(0), "UNKNOWN");
        assert_eq!(unit_name(42), "42");
    }

    #[test]
    fn a_config_round_trips_into_the_loaders_yaml() {
        let c = RateLimitConfig {
            name: "n".into(),
            domain: "d".into(),
            descriptors: vec![RateLimitDescriptor {
                key: "k".into(),
                value: "80".into(),
                rate_limit: Some(RateLimitPolicy {
                    unit: RateLimitUnit::Week as i32,
                    requests_per_unit: 3,
                    ..Default::default()
                }),
                ..Default::default()
            }],
        };
        let bytes = c.encode_to_vec();
        let back = RateLimitConfig::decode(bytes.as_slice()).unwrap();
        assert_eq!(back, c);
        let yaml = to_yaml(&back).unwrap();
        let cfg = crate::config::Config::load(
            &[crate::config::ConfigFile {
                name: "n".into(),
                text: yaml,
            }],
            false,
        )
        .unwrap();
        assert!(cfg.has_domain("d"));
        assert!(cfg.dump().contains("WEEK"), "{}", cfg.dump());
    }
}
