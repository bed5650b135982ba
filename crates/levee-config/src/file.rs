//! The TOML file as written by the user. Every field is optional; unknown keys are errors
//! so that a typo is reported rather than silently ignored.

use std::path::Path;

use serde::Deserialize;

use crate::ConfigError;

/// One value or a list of them (`preset = "wordpress"` or `preset = ["wordpress", "mediawiki"]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

/// `workers = 4`, or `workers = "auto"` as nginx's `worker_processes` takes it.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum WorkersFile {
    Count(usize),
    Word(String),
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<OneOrMany>,
    pub backend: Option<String>,
    pub root: Option<std::path::PathBuf>,
    pub preset: Option<OneOrMany>,
    pub debug_headers: Option<bool>,
    pub workers: Option<WorkersFile>,
    pub cache: Option<CacheFile>,
    pub anonymous: Option<AnonymousFile>,
    pub limits: Option<LimitsFile>,
    #[serde(rename = "static")]
    pub static_files: Option<StaticFile>,
    pub fastcgi: Option<FastCgiFile>,
    pub compression: Option<CompressionFile>,
    pub admin: Option<AdminFile>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminFile {
    pub listen: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticFile {
    pub index: Option<Vec<String>>,
    pub asset_extensions: Option<Vec<String>>,
    pub asset_max_age: Option<String>,
    pub memory: Option<String>,
    pub memory_max_file: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FastCgiFile {
    pub index: Option<String>,
    pub keep_alive: Option<usize>,
    pub max_unsized_body: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompressionFile {
    pub enabled: Option<bool>,
    pub min_size: Option<String>,
    pub store: Option<String>,
    pub transcode_memory: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheFile {
    pub size: Option<String>,
    pub max_object_size: Option<String>,
    pub heuristic: Option<bool>,
    pub heuristic_fraction: Option<f64>,
    pub heuristic_max: Option<String>,
    pub micro_cache: Option<String>,
    pub grace: Option<String>,
    pub hit_for_miss: Option<String>,
    pub keep: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnonymousFile {
    pub session_cookies: Option<Vec<String>>,
    pub extra_session_cookies: Option<Vec<String>>,
    pub pass_paths: Option<Vec<String>>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsFile {
    pub max_connections: Option<usize>,
    pub max_header_bytes: Option<String>,
    pub max_headers: Option<usize>,
    pub header_timeout: Option<String>,
    pub backend_connect_timeout: Option<String>,
    pub backend_first_byte_timeout: Option<String>,
    pub backend_read_timeout: Option<String>,
    pub backend_max_concurrency: Option<usize>,
    pub backend_queue: Option<usize>,
    pub backend_queue_timeout: Option<String>,
    pub shutdown_timeout: Option<String>,
}

impl FileConfig {
    pub fn read(path: &Path) -> Result<FileConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }
}
