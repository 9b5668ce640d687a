//! Requests and responses as the reference's span attributes carry them:
//! Go's `String()` of the message, protobuf text format on one line
//! (`domain:"edge" descriptors:{entries:{key:"user" value:"alice"}}`),
//! fields at their default value left out. (Go adds a second space at
//! random places on purpose, so that nobody parses it; this writes one.)

use std::fmt::Write;

use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};

const UNITS: [&str; 8] = [
    "UNKNOWN", "SECOND", "MINUTE", "HOUR", "DAY", "MONTH", "YEAR", "WEEK",
];
const CODES: [&str; 3] = ["UNKNOWN", "OK", "OVER_LIMIT"];

fn enum_name(names: &[&str], v: i32) -> String {
    usize::try_from(v)
        .ok()
        .and_then(|i| names.get(i))
        .map(|s| s.to_string())
        .unwrap_or_else(|| v.to_string())
}

fn quoted(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// One line of fields, joined by spaces.
struct Fields(String);

impl Fields {
    fn new() -> Fields {
        Fields(String::new())
    }
    fn sep(&mut self) {
        if !self.0.is_empty() {
            self.0.push(' ');
        }
    }
    fn string(&mut self, name: &str, v: &str) {
        if !v.is_empty() {
            self.sep();
            self.0.push_str(name);
            self.0.push(':');
            quoted(&mut self.0, v);
        }
    }
    fn raw(&mut self, name: &str, v: impl std::fmt::Display, default: bool) {
        if !default {
            self.sep();
            let _ = write!(self.0, "{name}:{v}");
        }
    }
    /// A limit's rate, alike in the request's override and the
    /// response's current limit.
    fn rate(&mut self, requests_per_unit: u32, unit: i32) {
        self.raw(
            "requests_per_unit",
            requests_per_unit,
            requests_per_unit == 0,
        );
        self.raw("unit", enum_name(&UNITS, unit), unit == 0);
    }
    fn message(&mut self, name: &str, inner: Fields) {
        self.sep();
        let _ = write!(self.0, "{name}:{{{}}}", inner.0);
    }
}

pub fn request(r: &RateLimitRequest) -> String {
    let mut f = Fields::new();
    f.string("domain", &r.domain);
    for d in &r.descriptors {
        let mut df = Fields::new();
        for e in &d.entries {
            let mut ef = Fields::new();
            ef.string("key", &e.key);
            ef.string("value", &e.value);
            df.message("entries", ef);
        }
        if let Some(l) = &d.limit {
            let mut lf = Fields::new();
            lf.rate(l.requests_per_unit, l.unit);
            df.message("limit", lf);
        }
        if let Some(h) = &d.hits_addend {
            let mut hf = Fields::new();
            hf.raw("value", h.value, h.value == 0);
            df.message("hits_addend", hf);
        }
        df.raw("is_negative_hits", "true", !d.is_negative_hits);
        f.message("descriptors", df);
    }
    f.raw("hits_addend", r.hits_addend, r.hits_addend == 0);
    f.0
}

pub fn response(r: &RateLimitResponse) -> String {
    let mut f = Fields::new();
    f.raw(
        "overall_code",
        enum_name(&CODES, r.overall_code),
        r.overall_code == 0,
    );
    for s in &r.statuses {
        let mut sf = Fields::new();
        sf.raw("code", enum_name(&CODES, s.code), s.code == 0);
        if let Some(l) = &s.current_limit {
            let mut lf = Fields::new();
            lf.string("name", &l.name);
            lf.rate(l.requests_per_unit, l.unit);
            sf.message("current_limit", lf);
        }
        sf.raw("limit_remaining", s.limit_remaining, s.limit_remaining == 0);
        if let Some(d) = &s.duration_until_reset {
            let mut df = Fields::new();
            df.raw("seconds", d.seconds, d.seconds == 0);
            df.raw("nanos", d.nanos, d.nanos == 0);
            sf.message("duration_until_reset", df);
        }
        f.message("statuses", sf);
    }
    for h in &r.response_headers_to_add {
        let mut hf = Fields::new();
        hf.string("key", &h.key);
        hf.string("value", &h.value);
        f.message("response_headers_to_add", hf);
    }
    f.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
        Entry, RateLimitOverride,
    };
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
    use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
        DescriptorStatus, RateLimit,
    };
    use envoy_types::pb::google::protobuf::{Duration, UInt64Value};

    #[test]
    fn a_request_as_go_prints_it() {
        let r = RateLimitRequest {
            domain: "edge".into(),
            descriptors: vec![
                RateLimitDescriptor {
                    entries: vec![Entry {
                        key: "user".into(),
                        value: "al\"ice\n".into(),
                    }],
                    ..Default::default()
                },
                RateLimitDescriptor {
                    entries: vec![Entry {
                        key: "path".into(),
                        value: String::new(),
                    }],
                    limit: Some(RateLimitOverride {
                        requests_per_unit: 3,
                        unit: 3,
                    }),
                    hits_addend: Some(UInt64Value { value: 0 }),
                    is_negative_hits: true,
                },
            ],
            hits_addend: 2,
        };
        assert_eq!(
            request(&r),
            r#"domain:"edge" descriptors:{entries:{key:"user" value:"al\"ice\n"}} descriptors:{entries:{key:"path"} limit:{requests_per_unit:3 unit:HOUR} hits_addend:{} is_negative_hits:true} hits_addend:2"#
        );
    }

    #[test]
    fn a_response_as_go_prints_it() {
        let r = RateLimitResponse {
            overall_code: 2,
            statuses: vec![DescriptorStatus {
                code: 2,
                current_limit: Some(RateLimit {
                    name: String::new(),
                    requests_per_unit: 5,
                    unit: 3,
                }),
                limit_remaining: 0,
                duration_until_reset: Some(Duration {
                    seconds: 1444,
                    nanos: 0,
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            response(&r),
            "overall_code:OVER_LIMIT statuses:{code:OVER_LIMIT current_limit:{requests_per_unit:5 unit:HOUR} duration_until_reset:{seconds:1444}}"
        );
    }
}
