//! Reads the configuration files from the runtime directory and reloads
//! them when they change or the root's symlink is swapped: the last good
//! configuration stays when a new one fails to load.
//!
//! Loading never runs on the async runtime: the watcher is a thread of its
//! own and each load runs on another, which the watcher waits for at most
//! `RUNTIME_LOAD_TIMEOUT`. A load reads only regular files (checked on the
//! opened descriptor, opened without blocking, so a FIFO or a device is
//! refused, not read), at most `RUNTIME_MAX_FILE_BYTES` each and
//! `RUNTIME_MAX_TOTAL_BYTES` together, and refuses text nested deeper than
//! `RUNTIME_MAX_DEPTH` before the YAML parser sees it.

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use crate::config::{Config, ConfigError, ConfigFile};
use crate::log;
use crate::service::State;

/// Directories below the runtime directory, at most (a symlink loop would
/// otherwise recurse forever).
const MAX_DIR_DEPTH: usize = 16;
/// Files in the runtime directory, at most.
const MAX_FILES: usize = 10_000;

/// What a load may read.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub max_file_bytes: u64,
    pub max_total_bytes: u64,
    pub max_depth: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            max_file_bytes: 1 << 20,
            max_total_bytes: 4 << 20,
            max_depth: 64,
        }
    }
}

/// Every file under `dir` (sorted, recursively), named as the reference's
/// runtime names them: `prefix` + the relative path without its extension,
/// `/` as `.`.
pub fn read_files(
    dir: &Path,
    prefix: &str,
    ignore_dot_files: bool,
    bounds: &Bounds,
) -> Result<Vec<ConfigFile>, String> {
    let mut paths = Vec::new();
    walk(dir, &mut paths, ignore_dot_files, 0).map_err(|e| format!("{}: {e}", dir.display()))?;
    paths.sort();
    let mut files = Vec::new();
    let mut total: u64 = 0;
    for p in paths {
        let text = read_regular(&p, bounds.max_file_bytes)?;
        total = total.saturating_add(text.len() as u64);
        if total > bounds.max_total_bytes {
            return Err(format!(
                "{}: the configuration files are larger than {} bytes together (RUNTIME_MAX_TOTAL_BYTES)",
                dir.display(),
                bounds.max_total_bytes
            ));
        }
        let depth = nesting_depth(&text);
        if depth > bounds.max_depth {
            return Err(format!(
                "{}: nested {depth} levels deep, more than {} (RUNTIME_MAX_DEPTH)",
                p.display(),
                bounds.max_depth
            ));
        }
        let rel = p.strip_prefix(dir).unwrap_or(&p).with_extension("");
        let name = format!("{prefix}{}", rel.to_string_lossy().replace('/', "."));
        files.push(ConfigFile { name, text });
    }
    Ok(files)
}

/// One file's text, if it is a regular file no larger than `max` bytes.
fn read_regular(p: &Path, max: u64) -> Result<String, String> {
    let why = |e: std::io::Error| format!("{}: {e}", p.display());
    // O_NONBLOCK: opening a FIFO with no writer would wait forever.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(p)
        .map_err(why)?;
    // The type of what was opened, not of what the path named a moment ago.
    let meta = f.metadata().map_err(why)?;
    if !meta.file_type().is_file() {
        return Err(format!(
            "{}: not a regular file ({}): refused",
            p.display(),
            kind(&meta.file_type())
        ));
    }
    let too_large = || {
        format!(
            "{}: larger than {max} bytes (RUNTIME_MAX_FILE_BYTES)",
            p.display()
        )
    };
    if meta.len() > max {
        return Err(too_large());
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    // A file that grows while read is still read up to the bound only.
    f.take(max.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(why)?;
    if buf.len() as u64 > max {
        return Err(too_large());
    }
    String::from_utf8(buf).map_err(|_| format!("{}: not UTF-8 text", p.display()))
}

fn kind(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>, ignore_dot: bool, depth: usize) -> std::io::Result<()> {
    if depth > MAX_DIR_DEPTH {
        return Err(std::io::Error::other(format!(
            "directories nested more than {MAX_DIR_DEPTH} deep (a symlink loop?)"
        )));
    }
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name();
        if ignore_dot && name.to_string_lossy().starts_with('.') {
            continue;
        }
        let p = e.path();
        // Follows symlinks, as the runtime loader does.
        let meta = std::fs::metadata(&p)?;
        if meta.is_dir() {
            walk(&p, out, ignore_dot, depth + 1)?;
        } else {
            if out.len() >= MAX_FILES {
                return Err(std::io::Error::other(format!(
                    "more than {MAX_FILES} files"
                )));
            }
            out.push(p);
        }
    }
    Ok(())
}

/// How deep `text` nests, counted cheaply and from above: block indentation
/// levels, sequence dashes that open a line, and flow brackets (`[`, `{`)
/// outside quoted scalars and comments. The YAML parser takes time
/// quadratic in flow nesting, so deep text is refused before it gets there.
pub fn nesting_depth(text: &str) -> usize {
    let mut max = 0usize;
    let mut flow = 0usize;
    let mut indents: Vec<usize> = Vec::new();
    let mut quote: Option<u8> = None;
    for line in text.lines() {
        let b = line.as_bytes();
        let mut i = 0;
        let mut block = indents.len();
        if flow == 0 && quote.is_none() {
            let ind = b.iter().take_while(|&&c| c == b' ' || c == b'\t').count();
            let rest = &b[ind..];
            if rest.is_empty() || rest[0] == b'#' {
                continue;
            }
            while indents.last().is_some_and(|&t| t > ind) {
                indents.pop();
            }
            if indents.last() != Some(&ind) {
                indents.push(ind);
            }
            block = indents.len();
            i = ind;
            // `- - - x` nests one level per dash.
            while i + 1 < b.len() && b[i] == b'-' && b[i + 1] == b' ' {
                block += 1;
                i += 2;
                while i < b.len() && b[i] == b' ' {
                    i += 1;
                }
            }
        }
        // The last significant byte: a quote opens a scalar only where a
        // scalar may start (a quote inside a plain scalar is text).
        let mut prev: u8 = b' ';
        let mut prev_sig: u8 = b'\n';
        while i < b.len() {
            let c = b[i];
            match quote {
                Some(q) => {
                    if q == b'"' && c == b'\\' {
                        i += 1;
                    } else if c == q {
                        if q == b'\'' && b.get(i + 1) == Some(&b'\'') {
                            i += 1;
                        } else {
                            quote = None;
                        }
                    }
                }
                None => match c {
                    b'"' | b'\''
                        if matches!(prev_sig, b'\n' | b'[' | b'{' | b',' | b':' | b'-' | b'?') =>
                    {
                        quote = Some(c)
                    }
                    b'#' if prev == b' ' || prev == b'\t' => break,
                    b'[' | b'{' => {
                        flow += 1;
                        max = max.max(block + flow);
                    }
                    b']' | b'}' => flow = flow.saturating_sub(1),
                    _ => {}
                },
            }
            prev = c;
            if c != b' ' && c != b'\t' {
                prev_sig = c;
            }
            i += 1;
        }
        max = max.max(block + flow);
    }
    max
}

/// What identifies the loaded state of the directory: the resolved root
/// and, per file, its path, device, inode, size and modification and
/// change times (an edit that keeps the size and restores the mtime still
/// moves the ctime).
type Fingerprint = Vec<(String, u64, u64, u64, i64, i64, i64, i64)>;

fn fingerprint(root: &Path, dir: &Path) -> Fingerprint {
    let mut v = vec![(
        std::fs::canonicalize(root)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default(),
        0,
        0,
        0,
        0,
        0,
        0,
        0,
    )];
    let mut paths = Vec::new();
    let _ = walk(dir, &mut paths, false, 0);
    paths.sort();
    for p in paths {
        let name = p.to_string_lossy().into_owned();
        v.push(match std::fs::metadata(&p) {
            Ok(m) => (
                name,
                m.dev(),
                m.ino(),
                m.len(),
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec(),
            ),
            Err(_) => (name, 0, 0, 0, 0, 0, 0, 0),
        });
    }
    v
}

/// Whether a load thread is still running (one that outlived its timeout
/// included): no second one starts meanwhile.
static LOADING: AtomicBool = AtomicBool::new(false);

fn bounds(state: &State) -> Bounds {
    Bounds {
        max_file_bytes: state.settings.runtime_max_file_bytes,
        max_total_bytes: state.settings.runtime_max_total_bytes,
        max_depth: state.settings.runtime_max_depth,
    }
}

/// Reads and parses on a thread of its own, waiting for it at most
/// `timeout`.
fn load_bounded(state: &State, timeout: Duration) -> Result<Config, ConfigError> {
    if LOADING.swap(true, Ordering::AcqRel) {
        return Err(ConfigError(
            "the previous configuration load is still running".into(),
        ));
    }
    let (dir, prefix) = state.settings.config_dir();
    let ignore_dot = state.settings.runtime_ignore_dot_files;
    let merge = state.settings.merge_domain_config;
    let b = bounds(state);
    let (tx, rx) = mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new()
        .name("config-load".into())
        .spawn(move || {
            // Cleared even if the parser panics, or no load would run again.
            struct Done;
            impl Drop for Done {
                fn drop(&mut self) {
                    LOADING.store(false, Ordering::Release);
                }
            }
            let _done = Done;
            let r = read_files(&dir, &prefix, ignore_dot, &b)
                .map_err(ConfigError)
                .and_then(|files| Config::load(&files, merge));
            let _ = tx.send(r);
            give_back_memory();
        });
    if let Err(e) = spawned {
        LOADING.store(false, Ordering::Release);
        return Err(ConfigError(format!("cannot start a load thread: {e}")));
    }
    match rx.recv_timeout(timeout) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(ConfigError(format!(
            "loading took longer than {timeout:?} (RUNTIME_LOAD_TIMEOUT): refused"
        ))),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Err(ConfigError("the load stopped without a result".into()))
        }
    }
}

/// Parsing a large file leaves the allocator holding its peak; hand the
/// free pages back to the system: the Rust allocator's (mimalloc, the
/// binary's global allocator; the load's thread is the one that freed
/// them), and the C library's (OpenSSL's allocations).
fn give_back_memory() {
    // SAFETY: mi_collect frees and decommits only memory mimalloc holds
    // unused; it is safe whichever allocator is global (the tests' own
    // binaries keep the system's).
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Loads the configuration once; counts the result as the reference does.
/// Blocks the calling thread (never call it on the async runtime).
pub fn load(state: &State) -> Result<(), ConfigError> {
    install(
        state,
        load_bounded(state, state.settings.runtime_load_timeout),
        "runtime",
    )
}

/// Makes a loaded configuration the current one, or keeps the last good
/// one; counts and logs either as the reference does. `source` names where
/// it came from (`runtime`, `xDS`).
pub fn install(
    state: &State,
    loaded: Result<Config, ConfigError>,
    source: &str,
) -> Result<(), ConfigError> {
    match loaded {
        Ok(c) => {
            let policies = c.policies();
            if !policies.is_empty() && state.mode() == crate::plan::Mode::AllOrNothing {
                log::warn(&format!(
                    "rules name policies ({}): in all-or-nothing mode their own numbers decide (CL.THROTTLEALL), except shadow rules",
                    policies.join(", ")
                ));
            }
            *state.config.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(c));
            state.stats.add("ratelimit.service.config_load_success", 1);
            log::info("loaded the rate limit configuration");
            Ok(())
        }
        Err(e) => {
            state.stats.add("ratelimit.service.config_load_error", 1);
            log::error(&format!(
                "error loading new configuration from {source}: {e}"
            ));
            Err(e)
        }
    }
}

/// Polls the runtime directory and reloads on any change, on a thread of
/// its own.
pub fn watch(state: Arc<State>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("config-watch".into())
        .spawn(move || {
            let (dir, _) = state.settings.config_dir();
            let root = PathBuf::from(&state.settings.runtime_root);
            let mut last = fingerprint(&root, &dir);
            loop {
                std::thread::sleep(state.settings.runtime_poll_interval);
                // A load that outlived its timeout still runs: look again
                // once it is done, not meanwhile.
                if LOADING.load(Ordering::Acquire) {
                    continue;
                }
                let now = fingerprint(&root, &dir);
                if now != last {
                    last = now;
                    let _ = load(&state);
                }
            }
        })
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tempdir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rls-loader-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn runtime_names() {
        let dir = tempdir("names");
        std::fs::create_dir_all(dir.join("team")).unwrap();
        std::fs::write(dir.join("edge.yaml"), "a").unwrap();
        std::fs::write(dir.join("team/api.yml"), "b").unwrap();
        std::fs::write(dir.join(".hidden.yaml"), "c").unwrap();
        let names = |ignore| -> Vec<String> {
            read_files(&dir, "config.", ignore, &Bounds::default())
                .unwrap()
                .into_iter()
                .map(|f| f.name)
                .collect()
        };
        assert_eq!(names(true), vec!["config.edge", "config.team.api"]);
        assert_eq!(
            names(false),
            vec!["config..hidden", "config.edge", "config.team.api"]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_regular_files_within_the_bounds() {
        let dir = tempdir("bounds");
        let b = Bounds {
            max_file_bytes: 100,
            max_total_bytes: 150,
            max_depth: 8,
        };
        let read = || read_files(&dir, "config.", false, &b);
        std::fs::write(dir.join("a.yaml"), "x".repeat(100)).unwrap();
        assert!(read().is_ok());
        std::fs::write(dir.join("a.yaml"), "x".repeat(101)).unwrap();
        let e = read().unwrap_err();
        assert!(e.contains("a.yaml: larger than 100 bytes"), "{e}");
        std::fs::write(dir.join("a.yaml"), "x".repeat(80)).unwrap();
        std::fs::write(dir.join("b.yaml"), "x".repeat(80)).unwrap();
        let e = read().unwrap_err();
        assert!(e.contains("larger than 150 bytes together"), "{e}");
        std::fs::remove_file(dir.join("b.yaml")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.join("z.yaml")).unwrap();
        let e = read().unwrap_err();
        assert!(
            e.contains("z.yaml: not a regular file (a character device)"),
            "{e}"
        );
        std::fs::remove_file(dir.join("z.yaml")).unwrap();
        let fifo = std::ffi::CString::new(dir.join("f.yaml").to_string_lossy().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let e = read().unwrap_err();
        assert!(e.contains("f.yaml: not a regular file (a FIFO)"), "{e}");
        std::fs::remove_file(dir.join("f.yaml")).unwrap();
        std::fs::write(dir.join("a.yaml"), "a: [[[[[[[[[1]]]]]]]]]").unwrap();
        let e = read().unwrap_err();
        assert!(e.contains("nested 10 levels deep, more than 8"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn nesting_depth_counts_blocks_dashes_and_flows() {
        assert_eq!(nesting_depth("a: 1\nb: 2\n"), 1);
        assert_eq!(nesting_depth("a:\n  b:\n    c: 1\n  d: 2\n"), 3);
        assert_eq!(nesting_depth("- - - x\n"), 4);
        assert_eq!(nesting_depth("a: [1, [2, {b: 3}]]\n"), 4);
        // Brackets in quotes and comments are text.
        assert_eq!(nesting_depth("a: \"[[[[\" # [[[[\nb: '[[''[['\n"), 1);
        // A quote inside a plain scalar opens nothing.
        assert_eq!(nesting_depth("a: [x\"y, [[1]]]\n"), 4);
        // A closing bracket in a quote does not hide nesting.
        assert_eq!(nesting_depth("a: [[[ \"]]]\" [[1]]]]]\n"), 6);
        let deep = format!("metadata: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(nesting_depth(&deep), 100_001);
    }
}
