//! Reads the configuration files from the runtime directory and reloads
//! them when they change or the root's symlink is swapped: the last good
//! configuration stays when a new one fails to load.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use crate::config::{Config, ConfigError, ConfigFile};
use crate::log;
use crate::service::State;

/// Every file under `dir` (sorted, recursively), named as the reference's
/// runtime names them: `prefix` + the relative path without its extension,
/// `/` as `.`.
pub fn read_files(
    dir: &Path,
    prefix: &str,
    ignore_dot_files: bool,
) -> std::io::Result<Vec<ConfigFile>> {
    let mut paths = Vec::new();
    walk(dir, &mut paths, ignore_dot_files)?;
    paths.sort();
    let mut files = Vec::new();
    for p in paths {
        let rel = p.strip_prefix(dir).unwrap_or(&p).with_extension("");
        let name = format!("{prefix}{}", rel.to_string_lossy().replace('/', "."));
        files.push(ConfigFile {
            name,
            text: std::fs::read_to_string(&p)?,
        });
    }
    Ok(files)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>, ignore_dot: bool) -> std::io::Result<()> {
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
            walk(&p, out, ignore_dot)?;
        } else {
            out.push(p);
        }
    }
    Ok(())
}

/// What identifies the loaded state of the directory: the resolved root
/// and each file's path, size and modification time.
fn fingerprint(root: &Path, dir: &Path) -> Vec<(String, u64, Option<SystemTime>)> {
    let mut v = vec![(
        std::fs::canonicalize(root)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default(),
        0,
        None,
    )];
    let mut paths = Vec::new();
    let _ = walk(dir, &mut paths, false);
    paths.sort();
    for p in paths {
        let m = std::fs::metadata(&p).ok();
        v.push((
            p.to_string_lossy().into_owned(),
            m.as_ref().map(|m| m.len()).unwrap_or(0),
            m.and_then(|m| m.modified().ok()),
        ));
    }
    v
}

/// Loads the configuration once; counts the result as the reference does.
pub fn load(state: &State) -> Result<(), ConfigError> {
    let (dir, prefix) = state.settings.config_dir();
    let result = read_files(&dir, &prefix, state.settings.runtime_ignore_dot_files)
        .map_err(|e| ConfigError(format!("{}: {e}", dir.display())))
        .and_then(|files| Config::load(&files, state.settings.merge_domain_config));
    match result {
        Ok(c) => {
            *state.config.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(c));
            state.stats.add("ratelimit.service.config_load_success", 1);
            log::info("loaded the rate limit configuration");
            Ok(())
        }
        Err(e) => {
            state.stats.add("ratelimit.service.config_load_error", 1);
            log::error(&format!(
                "error loading new configuration from runtime: {e}"
            ));
            Err(e)
        }
    }
}

/// Polls the runtime directory and reloads on any change.
pub async fn watch(state: Arc<State>) {
    let (dir, _) = state.settings.config_dir();
    let root = PathBuf::from(&state.settings.runtime_root);
    let mut last = fingerprint(&root, &dir);
    loop {
        tokio::time::sleep(state.settings.runtime_poll_interval).await;
        let now = fingerprint(&root, &dir);
        if now != last {
            last = now;
            let _ = load(&state);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn runtime_names() {
        let dir = std::env::temp_dir().join(format!("rls-loader-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("team")).unwrap();
        std::fs::write(dir.join("edge.yaml"), "a").unwrap();
        std::fs::write(dir.join("team/api.yml"), "b").unwrap();
        std::fs::write(dir.join(".hidden.yaml"), "c").unwrap();
        let names = |ignore| -> Vec<String> {
            super::read_files(&dir, "config.", ignore)
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
}
