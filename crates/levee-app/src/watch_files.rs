//! Watching the application's files: a change restarts its processes one by one.

use std::path::PathBuf;

use crate::config::AppError;

pub(crate) type Changes = tokio::sync::mpsc::UnboundedReceiver<()>;

/// Watches `paths` (recursively); a change to a file's content, a new or removed file
/// sends one `()`.
pub(crate) fn watch_files(
    paths: &[PathBuf],
) -> Result<(Option<notify::RecommendedWatcher>, Option<Changes>), AppError> {
    use notify::{EventKind, RecursiveMode, Watcher};
    if paths.is_empty() {
        return Ok((None, None));
    }
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
        if let Ok(e) = e {
            if matches!(
                e.kind,
                EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_)
            ) {
                let _ = tx.send(());
            }
        }
    })
    .map_err(|source| AppError::Watch {
        path: paths[0].clone(),
        source,
    })?;
    for p in paths {
        watcher
            .watch(p, RecursiveMode::Recursive)
            .map_err(|source| AppError::Watch {
                path: p.clone(),
                source,
            })?;
    }
    Ok((Some(watcher), Some(rx)))
}
