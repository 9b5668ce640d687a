//! The trace context a caller sends, read as the reference's propagators
//! read it (`TraceContext`, then `B3`, in envoyproxy/ratelimit
//! `src/trace/trace.go`): W3C `traceparent` (and `tracestate`), and B3's
//! single `b3` header or its `x-b3-*` headers, which win when valid (Go's
//! composite propagator applies them in that order). Envoy sends
//! `traceparent` on the rate limit call's gRPC metadata with its
//! OpenTelemetry tracer, B3 with Zipkin.

/// A caller's span: the parent of the spans of its request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remote {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub sampled: bool,
    pub trace_state: String,
}

/// The caller's context from its headers (`get` by lower-case name).
pub fn extract<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Option<Remote> {
    let w3c = get("traceparent").and_then(|tp| {
        let mut r = traceparent(tp)?;
        r.trace_state = get("tracestate")
            .filter(|s| s.len() <= 512 && s.bytes().all(|b| (0x20..0x7f).contains(&b)))
            .unwrap_or_default()
            .trim()
            .to_string();
        Some(r)
    });
    b3(&get).or(w3c)
}

fn hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    // Lower case only, as the W3C text requires.
    if s.len() != 2 * N
        || !s
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// `version-traceid-spanid-flags`: version 00 has exactly these four
/// fields; a later version may add fields after them; `ff` is invalid,
/// as are all-zero ids.
pub fn traceparent(v: &str) -> Option<Remote> {
    let v = v.trim();
    let mut parts = v.splitn(5, '-');
    let version: [u8; 1] = hex(parts.next()?)?;
    let trace_id: [u8; 16] = hex(parts.next()?)?;
    let span_id: [u8; 8] = hex(parts.next()?)?;
    let flags: [u8; 1] = hex(parts.next()?)?;
    let extra = parts.next();
    if version[0] == 0xff || (version[0] == 0 && extra.is_some()) {
        return None;
    }
    valid(trace_id, span_id, flags[0] & 1 == 1)
}

fn valid(trace_id: [u8; 16], span_id: [u8; 8], sampled: bool) -> Option<Remote> {
    if trace_id == [0; 16] || span_id == [0; 8] {
        return None;
    }
    Some(Remote {
        trace_id,
        span_id,
        sampled,
        trace_state: String::new(),
    })
}

/// A B3 trace id: 32 hex digits, or 16 (the high half zero).
fn b3_trace_id(s: &str) -> Option<[u8; 16]> {
    if s.len() == 16 {
        let low: [u8; 8] = hex(s)?;
        let mut t = [0u8; 16];
        t[8..].copy_from_slice(&low);
        return Some(t);
    }
    hex(s)
}

fn b3<'a>(get: &impl Fn(&str) -> Option<&'a str>) -> Option<Remote> {
    if let Some(single) = get("b3") {
        // `{trace}-{span}[-{sampling}[-{parent}]]`; `0`, `1` or `d` alone
        // carry no span to be the parent of this one.
        let mut f = single.trim().split('-');
        let trace_id = b3_trace_id(f.next()?)?;
        let span_id: [u8; 8] = hex(f.next()?)?;
        let sampled = match f.next() {
            None => false,
            Some("1") | Some("d") => true,
            Some("0") => false,
            Some(_) => return None,
        };
        if let Some(parent) = f.next() {
            hex::<8>(parent)?;
        }
        if f.next().is_some() {
            return None;
        }
        return valid(trace_id, span_id, sampled);
    }
    let trace_id = b3_trace_id(get("x-b3-traceid")?.trim())?;
    let span_id: [u8; 8] = hex(get("x-b3-spanid")?.trim())?;
    let debug = get("x-b3-flags").map(str::trim) == Some("1");
    let sampled = match get("x-b3-sampled").map(str::trim) {
        None => false,
        Some("1") | Some("true") => true,
        Some("0") | Some("false") => false,
        Some(_) => return None,
    };
    valid(trace_id, span_id, sampled || debug)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(h: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<&'a str> + 'a {
        move |k| h.iter().find(|(n, _)| *n == k).map(|(_, v)| *v)
    }

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn traceparent_as_w3c_defines_it() {
        let r = extract(get(&[
            ("traceparent", TP),
            ("tracestate", "congo=t61rcWkgMzE"),
        ]))
        .unwrap();
        assert_eq!(r.trace_id[..4], [0x4b, 0xf9, 0x2f, 0x35]);
        assert_eq!(r.span_id, [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]);
        assert!(r.sampled);
        assert_eq!(r.trace_state, "congo=t61rcWkgMzE");
        let unsampled = TP.replace("-01", "-00");
        assert!(!traceparent(&unsampled).unwrap().sampled);
        // Later versions may add fields; version 00 may not.
        assert!(traceparent(&format!("cc{}-what", &TP[2..])).is_some());
        assert!(traceparent(&format!("{TP}-what")).is_none());
        for bad in [
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "",
            "garbage",
        ] {
            assert!(traceparent(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn b3_single_and_multi_win_over_traceparent() {
        let r = extract(get(&[
            ("traceparent", TP),
            (
                "b3",
                "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1-05e3ac9a4f6e3b90",
            ),
        ]))
        .unwrap();
        assert_eq!(r.trace_id[0], 0x80);
        assert!(r.sampled);
        let r = extract(get(&[
            ("x-b3-traceid", "a3ce929d0e0e4736"),
            ("x-b3-spanid", "00f067aa0ba902b7"),
            ("x-b3-sampled", "0"),
        ]))
        .unwrap();
        assert_eq!(r.trace_id[..8], [0; 8]);
        assert!(!r.sampled);
        let debug = [
            ("x-b3-traceid", "a3ce929d0e0e4736"),
            ("x-b3-spanid", "00f067aa0ba902b7"),
            ("x-b3-flags", "1"),
        ];
        assert!(extract(get(&debug)).unwrap().sampled);
        // An invalid B3 leaves traceparent's.
        let r = extract(get(&[("traceparent", TP), ("b3", "1")])).unwrap();
        assert_eq!(r.trace_id[0], 0x4b);
        assert!(extract(get(&[])).is_none());
    }
}
