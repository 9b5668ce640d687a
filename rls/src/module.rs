//! Whether a Redis can run the service's commands: the redis-cell module,
//! at the version this service needs, as `MODULE LIST` shows it (or, where
//! a server refuses `MODULE LIST` to the service's user, as a probe of the
//! newest options the service sends). Pure: what a check finds and how it
//! is worded, for the log, the health check and the calls' error.

/// The module's name in `MODULE LIST`.
pub const NAME: &str = "redis-cell";

/// The probe, after its key: a read-only fixed-window peek with the
/// option the default mode sends, which a server without the module (or
/// with an older one) answers with an error.
pub const PROBE: &[&str] = &["1", "1", "ALIGN", "COUNTALL"];

/// A version as `MODULE LIST`'s `ver` writes it: major * 10000 + minor *
/// 100 + patch (0.4.0 is 400).
pub fn version_number(text: &str) -> i64 {
    let mut parts = text
        .split(['.', '-', '+'])
        .map(|p| p.parse::<i64>().unwrap_or(0));
    let mut n = 0;
    for scale in [10_000, 100, 1] {
        n += parts.next().unwrap_or(0) * scale;
    }
    n
}

/// `ver` as text (400 is 0.4.0).
pub fn version_text(ver: i64) -> String {
    format!("{}.{}.{}", ver / 10_000, ver / 100 % 100, ver % 100)
}

/// The module version this service needs: its own, since every
/// deliverable of the project shares one version.
pub fn required() -> i64 {
    version_number(env!("CARGO_PKG_VERSION"))
}

/// What a check of one server found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// The module, at this version (`None`: known by the probe only).
    Ready { version: Option<i64> },
    /// No redis-cell in `MODULE LIST`, or the probe is an unknown command.
    Missing,
    /// An older redis-cell than this service needs.
    TooOld { version: i64 },
    /// The probe answered another error (the text): an older module, or a
    /// user the server refuses the command.
    Refused(String),
}

/// From `MODULE LIST`'s entries, as `(name, ver)` pairs.
pub fn from_list(modules: &[(String, i64)]) -> Found {
    match modules.iter().find(|(name, _)| name == NAME) {
        None => Found::Missing,
        Some(&(_, version)) if version < required() => Found::TooOld { version },
        Some(&(_, version)) => Found::Ready {
            version: Some(version),
        },
    }
}

/// From the probe's reply: `Ok`, or the error's text.
pub fn from_probe(reply: Result<(), &str>) -> Found {
    match reply {
        Ok(()) => Found::Ready { version: None },
        Err(e) if e.to_ascii_lowercase().contains("unknown command") => Found::Missing,
        Err(e) => Found::Refused(e.to_string()),
    }
}

/// What to do, in one sentence's end: which file, which version, where.
fn remedy() -> String {
    format!(
        "load libredis_cell.so ({NAME} {} or later) into that server: `loadmodule /path/to/libredis_cell.so` in its redis.conf, or `--loadmodule /path/to/libredis_cell.so` on its command line",
        version_text(required())
    )
}

/// What is wrong with the server at `server`, for the log and as the
/// calls' error; `None` when it can run the service's commands.
pub fn problem(found: &Found, server: &str) -> Option<String> {
    Some(match found {
        Found::Ready { .. } => return None,
        Found::Missing => format!("Redis at {server} has no {NAME} module: {}", remedy()),
        // The version as MODULE LIST says it: redis-cell's first releases
        // all said `ver 1`.
        Found::TooOld { version } => format!(
            "Redis at {server} has an older {NAME} (MODULE LIST ver {version}) than this service needs: {}",
            remedy()
        ),
        Found::Refused(e) => format!(
            "Redis at {server} refused the probe `FW.PEEK <key> {}` ({e}), so it cannot run what this service sends: {}",
            PROBE.join(" "),
            remedy()
        ),
    })
}

/// A server's address as the log and errors name it: `REDIS_URL`'s
/// entry without a scheme or credentials.
pub fn server_name(url: &str) -> String {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let rest = rest.rsplit_once('@').map(|(_, r)| r).unwrap_or(rest);
    rest.split(['/', '?', '#'])
        .next()
        .filter(|h| !h.is_empty())
        .unwrap_or(rest)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_as_module_list_writes_them() {
        assert_eq!(version_number("0.4.0"), 400);
        assert_eq!(version_number("1.12.3"), 11203);
        assert_eq!(version_number("2.0.1-rc.1"), 20001);
        assert_eq!(version_text(400), "0.4.0");
        assert_eq!(version_text(11203), "1.12.3");
        assert_eq!(required(), version_number(env!("CARGO_PKG_VERSION")));
    }

    #[test]
    fn what_a_check_finds() {
        let list = |ver: i64| vec![("search".to_string(), 20810), (NAME.to_string(), ver)];
        assert_eq!(
            from_list(&list(required())),
            Found::Ready {
                version: Some(required())
            }
        );
        assert_eq!(
            from_list(&list(required() - 1)),
            Found::TooOld {
                version: required() - 1
            }
        );
        assert_eq!(from_list(&[]), Found::Missing);
        assert_eq!(
            from_list(&[("redis-cell-x".into(), 999_999)]),
            Found::Missing
        );
        assert_eq!(from_probe(Ok(())), Found::Ready { version: None });
        assert_eq!(
            from_probe(Err(
                "ERR unknown command 'FW.PEEK', with args beginning with: 'k' "
            )),
            Found::Missing
        );
        assert_eq!(
            from_probe(Err("ERR syntax error: COUNTALL")),
            Found::Refused("ERR syntax error: COUNTALL".into())
        );
    }

    #[test]
    fn problems_name_the_module_and_where_to_load_it() {
        let v = version_text(required());
        assert_eq!(problem(&Found::Ready { version: None }, "h:1"), None);
        assert_eq!(
            problem(&Found::Missing, "127.0.0.1:6379").unwrap(),
            format!("Redis at 127.0.0.1:6379 has no redis-cell module: load libredis_cell.so (redis-cell {v} or later) into that server: `loadmodule /path/to/libredis_cell.so` in its redis.conf, or `--loadmodule /path/to/libredis_cell.so` on its command line")
        );
        assert!(problem(&Found::TooOld { version: 1 }, "h:1")
            .unwrap()
            .starts_with("Redis at h:1 has an older redis-cell (MODULE LIST ver 1) than this service needs: load libredis_cell.so"));
        assert!(problem(&Found::Refused("NOPERM x".into()), "h:1")
            .unwrap()
            .starts_with(
                "Redis at h:1 refused the probe `FW.PEEK <key> 1 1 ALIGN COUNTALL` (NOPERM x), so"
            ));
    }

    #[test]
    fn server_names_carry_no_credentials() {
        assert_eq!(server_name("127.0.0.1:6379"), "127.0.0.1:6379");
        assert_eq!(server_name("redis://u:secret@h:6380/0"), "h:6380");
        assert_eq!(server_name("rediss://:pw@h:6380/#insecure"), "h:6380");
        assert_eq!(server_name("/var/run/redis.sock"), "/var/run/redis.sock");
        assert_eq!(server_name("unix:///var/run/r.sock"), "/var/run/r.sock");
    }
}
