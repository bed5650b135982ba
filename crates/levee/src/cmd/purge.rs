//! `levee purge`: the client of the admin listener's `POST /purge`.

use std::process::ExitCode;

use anyhow::{bail, Context};
use bytes::Bytes;
use clap::Args;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  levee purge http://example.com/wiki/Main_Page\n  levee purge --prefix http://example.com/wiki/\n  levee purge --tag post-57 --soft\n\nThe admin listener must be on: levee serve --admin-listen 127.0.0.1:9091."
)]
pub struct PurgeArgs {
    /// Every stored variant of this URL (http://host/path?query).
    #[arg(value_name = "URL", required_unless_present_any = ["tag", "prefix"], conflicts_with_all = ["tag", "prefix"])]
    pub url: Option<String>,
    /// Every response the backend tagged with TAG (Surrogate-Key, Cache-Tag or xkey).
    #[arg(long, value_name = "TAG", conflicts_with = "prefix")]
    pub tag: Option<String>,
    /// Every URL that starts with this one (http://host/path).
    #[arg(long, value_name = "URL")]
    pub prefix: Option<String>,
    /// Mark stale instead of removing: the next request revalidates, and the old copy
    /// still stands in if the backend fails.
    #[arg(long)]
    pub soft: bool,
    /// Only this site's responses (its `name`, or first host), for a tag; a URL or
    /// prefix names its site by its host.
    #[arg(long, value_name = "NAME")]
    pub site: Option<String>,
    /// The admin listener's address (levee serve --admin-listen).
    #[arg(
        long,
        value_name = "ADDR",
        env = "LEVEE_ADMIN",
        default_value = "127.0.0.1:9091"
    )]
    pub admin: String,
    /// The admin token, if levee serve has one ([admin] token).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "LEVEE_ADMIN_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
}

/// A mistake in what was asked (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PurgeUsage(pub String);

pub fn run(args: PurgeArgs) -> anyhow::Result<ExitCode> {
    let mut query = form_urlencoded::Serializer::new(String::new());
    match (&args.url, &args.tag, &args.prefix) {
        (Some(u), _, _) => query.append_pair("url", u),
        (_, Some(t), _) => query.append_pair("tag", t),
        (_, _, Some(p)) => query.append_pair("prefix", p),
        _ => bail!(PurgeUsage("give a URL, --tag or --prefix".into())),
    };
    if args.soft {
        query.append_pair("soft", "1");
    }
    if let Some(site) = &args.site {
        query.append_pair("site", site);
    }
    let (status, body) = admin_post(
        &args.admin,
        &format!("/purge?{}", query.finish()),
        args.token.as_deref(),
    )?;
    match status {
        StatusCode::OK => {
            let n = body
                .split("\"purged\":")
                .nth(1)
                .and_then(|s| s.split([',', '}']).next())
                .unwrap_or("?");
            let what = if args.soft { "marked stale" } else { "removed" };
            println!("levee: {n} stored response(s) {what}");
            Ok(ExitCode::SUCCESS)
        }
        // A malformed purge, or a host or site name no site has.
        StatusCode::BAD_REQUEST | StatusCode::NOT_FOUND => bail!(PurgeUsage(body)),
        other => bail!("the admin listener answered {other}: {body}"),
    }
}

/// `POST path` to the admin listener at `admin` (`127.0.0.1:9091`), with the token if
/// given; the status and body. A missing listener or a refused token is an error that
/// says what to do.
pub fn admin_post(
    admin: &str,
    path: &str,
    token: Option<&str>,
) -> anyhow::Result<(StatusCode, String)> {
    let admin = admin.trim_start_matches("http://").trim_end_matches('/');
    let uri = format!("http://{admin}{path}");
    let mut req = Request::builder().method(Method::POST).uri(&uri);
    if let Some(t) = token {
        req = req.header(http::header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let req = req
        .body(Empty::<Bytes>::new())
        .map_err(|e| PurgeUsage(format!("`{admin}` is not an address: {e}")))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("start the runtime")?;
    let (status, body) = rt.block_on(async {
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        let resp = tokio::time::timeout(std::time::Duration::from_secs(60), client.request(req))
            .await
            .map_err(|_| anyhow::anyhow!("the admin listener at {admin} did not answer within 60 s"))?
            .with_context(|| {
                format!("nothing answers at {admin}; start levee serve with --admin-listen {admin}, or give --admin ADDR")
            })?;
        let status = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        anyhow::Ok((status, String::from_utf8_lossy(&body).trim().to_string()))
    })?;
    if status == StatusCode::UNAUTHORIZED {
        bail!(PurgeUsage(
            "the admin listener needs its token: --token TOKEN or LEVEE_ADMIN_TOKEN".into()
        ));
    }
    Ok((status, body))
}
