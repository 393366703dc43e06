//! Crawling a documentation site over HTTP from a start URL: pages of the start URL's host only,
//! robots.txt honoured (its `Allow`/`Disallow` rules for this crawler or `*`, its `Crawl-delay`
//! and `Sitemap` lines), the site's sitemap as further starting points, and every page read like
//! a page of a built tree (`site`). Bounded in pages, link depth, bytes (per page and in all),
//! request rate and time per request; redirects are followed by hand so a loop or a hop to
//! another host is a skipped page with the reason. A page that fails is skipped with the reason;
//! the run goes on.
//!
//! A crawl interrupted or repeated costs no embedding twice: the embedding cache holds every text
//! already embedded, so the next run fetches the pages again and embeds only what changed.

use super::html::HtmlPage;
use super::site::{html_doc, read_html_page, site_name, sitemap_locations};
use super::tree::{FileNote, LoadOptions, Loaded, MAX_PAGE_BYTES};
use super::IngestError;
use std::collections::{HashSet, VecDeque};
use std::time::Duration;
use url::Url;

/// The crawler's name in its `User-Agent` and the robots.txt group it obeys (else `*`).
pub(crate) const CRAWLER_AGENT: &str = "retrieval-service-crawler";

/// Most redirects followed for one page.
const MAX_REDIRECTS: usize = 10;

/// Link targets that are never pages.
const NOT_PAGES: &[&str] = &[
    "png", "jpg", "jpeg", "gif", "svg", "webp", "ico", "css", "js", "mjs", "json", "xml", "pdf", "zip", "gz", "tgz",
    "tar", "bz2", "xz", "7z", "exe", "dmg", "msi", "deb", "rpm", "apk", "mp3", "mp4", "webm", "avi", "mov", "woff",
    "woff2", "ttf", "eot", "otf", "txt", "csv", "map", "wasm",
];

/// The bounds of one crawl.
#[derive(Debug, Clone)]
pub struct CrawlLimits {
    /// Pages fetched at most (redirects and skipped pages count).
    pub max_pages: usize,
    /// Links followed from the start URL at most (sitemap pages are at depth 1).
    pub max_depth: usize,
    /// Bytes of page bodies read in all; the crawl stops when they are spent.
    pub max_bytes: u64,
    /// Pause between two requests (robots.txt's `Crawl-delay` makes it longer, never shorter).
    pub delay: Duration,
    /// Time allowed for one request, its body included.
    pub timeout: Duration,
}

impl Default for CrawlLimits {
    fn default() -> Self {
        Self {
            max_pages: 500,
            max_depth: 8,
            max_bytes: 200 * 1024 * 1024,
            delay: Duration::from_millis(250),
            timeout: Duration::from_secs(15),
        }
    }
}

/// Crawls the site at `start` and reads its pages into docs; pages that could not be fetched or
/// read are in `skipped` with the reason, a limit reached is in `warnings`. Fails only when the
/// start URL is not an http(s) URL, or the site's robots.txt cannot be read (a 5xx or no answer:
/// nothing is crawled without knowing what the site allows).
pub async fn crawl_site(start: &str, limits: &CrawlLimits, options: &LoadOptions<'_>) -> Result<Loaded, IngestError> {
    let start = Url::parse(start.trim()).map_err(|error| invalid(format!("crawl start {start:?}: {error}")))?;
    if !matches!(start.scheme(), "http" | "https") || start.host_str().is_none() {
        return Err(invalid(format!("crawl start {start}: not an http(s) URL")));
    }
    let client = reqwest::Client::builder()
        .user_agent(concat!("retrieval-service-crawler/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::none())
        .timeout(limits.timeout)
        .build()
        .map_err(|error| IngestError::Internal(format!("http client: {error}")))?;
    let mut crawler = Crawler { client, limits: limits.clone(), bytes_read: 0, requests: 0, start: start.clone() };
    let robots = crawler.robots().await?;
    let delay = limits.delay.max(robots.crawl_delay.unwrap_or_default());
    crawler.limits.delay = delay;

    let mut queue: VecDeque<(Url, usize)> = VecDeque::from([(normalized(start.clone()), 0)]);
    let mut seen: HashSet<Url> = queue.iter().map(|(url, _)| url.clone()).collect();
    if limits.max_depth > 0 {
        for location in crawler.sitemap_pages(&robots).await {
            if crawler.same_site(&location) && seen.insert(location.clone()) {
                queue.push_back((location, 1));
            }
        }
    }
    let mut loaded = Loaded::default();
    let mut pages: Vec<(String, HtmlPage, Url)> = Vec::new();
    let mut fetched = 0usize;
    while let Some((url, depth)) = queue.pop_front() {
        if fetched >= limits.max_pages {
            loaded.warnings.push(FileNote {
                path: start.to_string(),
                reason: format!(
                    "page limit of {} reached: {} more pages not fetched",
                    limits.max_pages,
                    queue.len() + 1
                ),
            });
            break;
        }
        if crawler.bytes_read >= limits.max_bytes {
            loaded.warnings.push(FileNote {
                path: start.to_string(),
                reason: format!(
                    "byte limit of {} reached: {} more pages not fetched",
                    limits.max_bytes,
                    queue.len() + 1
                ),
            });
            break;
        }
        if !robots.allows(&url) {
            loaded.skipped.push(FileNote { path: url.to_string(), reason: "disallowed by robots.txt".to_string() });
            continue;
        }
        fetched += 1;
        let page = match crawler.fetch_page(&url, &robots, &seen).await {
            Ok(page) => page,
            Err(reason) => {
                loaded.skipped.push(FileNote { path: url.to_string(), reason });
                continue;
            }
        };
        if page.final_url != url && !seen.insert(page.final_url.clone()) {
            continue;
        }
        let relative = crawler.relative_path(&page.final_url);
        match read_html_page(page.body.as_slice(), page.charset.as_deref(), Some(&page.final_url), true, options) {
            Ok(read) => {
                if depth < limits.max_depth {
                    for link in &read.links {
                        let link = normalized(link.clone());
                        if crawler.same_site(&link) && looks_like_page(&link) && seen.insert(link.clone()) {
                            queue.push_back((link, depth + 1));
                        }
                    }
                }
                pages.push((relative, read, page.final_url));
            }
            Err(reason) => loaded.skipped.push(FileNote { path: page.final_url.to_string(), reason }),
        }
    }
    let site = site_name(pages.iter().map(|(_, page, _)| page));
    for (relative, mut page, address) in pages {
        page.canonical.get_or_insert_with(|| address.to_string());
        loaded.docs.push(html_doc(&relative, page, site.as_deref(), options));
    }
    Ok(loaded)
}

fn invalid(message: String) -> IngestError {
    IngestError::InvalidArgument(message)
}

/// The URL without its fragment.
fn normalized(mut url: Url) -> Url {
    url.set_fragment(None);
    url
}

fn looks_like_page(url: &Url) -> bool {
    let last = url.path().rsplit('/').next().unwrap_or_default();
    let extension = last.rsplit_once('.').map(|(_, extension)| extension.to_ascii_lowercase());
    matches!(url.scheme(), "http" | "https")
        && extension.is_none_or(|extension| !NOT_PAGES.contains(&extension.as_str()))
}

struct Fetched {
    final_url: Url,
    body: Vec<u8>,
    charset: Option<String>,
}

struct Crawler {
    client: reqwest::Client,
    limits: CrawlLimits,
    bytes_read: u64,
    requests: usize,
    start: Url,
}

impl Crawler {
    fn same_site(&self, url: &Url) -> bool {
        url.origin() == self.start.origin()
    }

    /// The page's path relative to the start URL's folder (its full path when outside it), with
    /// `index.html` for a folder and the query kept.
    fn relative_path(&self, url: &Url) -> String {
        let folder = &self.start.path()[..self.start.path().rfind('/').map_or(0, |at| at + 1)];
        let path = url.path().strip_prefix(folder).unwrap_or(url.path()).trim_start_matches('/');
        let mut relative = percent_encoding::percent_decode_str(path).decode_utf8_lossy().to_string();
        if relative.is_empty() || relative.ends_with('/') {
            relative.push_str("index.html");
        }
        if let Some(query) = url.query() {
            relative.push('?');
            relative.push_str(query);
        }
        relative
    }

    /// One GET, rate-limited: `Ok` with the response, or the reason.
    async fn get(&mut self, url: &Url) -> Result<reqwest::Response, String> {
        if self.requests > 0 && !self.limits.delay.is_zero() {
            tokio::time::sleep(self.limits.delay).await;
        }
        self.requests += 1;
        self.client.get(url.clone()).send().await.map_err(|error| {
            if error.is_timeout() {
                format!("no answer within {} s", self.limits.timeout.as_secs_f64())
            } else {
                format!("request failed: {error}")
            }
        })
    }

    /// Reads a body of at most `cap` bytes; more is the reason it is not read.
    async fn body(&mut self, mut response: reqwest::Response, cap: u64) -> Result<Vec<u8>, String> {
        let mut body = Vec::new();
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(error) if error.is_timeout() => {
                    return Err(format!("body not read within {} s", self.limits.timeout.as_secs_f64()))
                }
                Err(error) => return Err(format!("body unreadable: {error}")),
            };
            self.bytes_read += chunk.len() as u64;
            if body.len() as u64 + chunk.len() as u64 > cap {
                return Err(format!("larger than {cap} bytes: not read"));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// Fetches a page, following redirects inside the site (at most `MAX_REDIRECTS`, none twice,
    /// none to a page the crawl has already met).
    async fn fetch_page(&mut self, url: &Url, robots: &Robots, seen: &HashSet<Url>) -> Result<Fetched, String> {
        let mut current = url.clone();
        let mut chain = vec![current.clone()];
        loop {
            let response = self.get(&current).await?;
            let status = response.status();
            if status.is_redirection() {
                let location = response
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|value| value.to_str().ok())
                    .ok_or_else(|| format!("HTTP {status} without a Location"))?;
                let next =
                    normalized(current.join(location).map_err(|error| format!("bad redirect {location:?}: {error}"))?);
                if !self.same_site(&next) {
                    return Err(format!("redirects to another site ({next}): not followed"));
                }
                if chain.contains(&next) {
                    let loop_text = chain.iter().map(Url::as_str).collect::<Vec<_>>().join(" → ");
                    return Err(format!("redirect loop: {loop_text} → {next}"));
                }
                if chain.len() > MAX_REDIRECTS {
                    return Err(format!("more than {MAX_REDIRECTS} redirects"));
                }
                if !robots.allows(&next) {
                    return Err(format!("redirects to {next}, disallowed by robots.txt"));
                }
                if seen.contains(&next) {
                    return Err(format!("redirects to {next}, which the crawl reads on its own"));
                }
                chain.push(next.clone());
                current = next;
                continue;
            }
            if !status.is_success() {
                return Err(format!("HTTP {status}"));
            }
            let content_type = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default()
                .to_ascii_lowercase();
            let mime = content_type.split(';').next().unwrap_or_default().trim().to_string();
            if !mime.is_empty() && mime != "text/html" && mime != "application/xhtml+xml" {
                return Err(format!("not an HTML page ({mime}): not read"));
            }
            let charset = content_type
                .split(';')
                .filter_map(|parameter| parameter.trim().strip_prefix("charset="))
                .map(|charset| charset.trim_matches('"').to_string())
                .next();
            let body = self.body(response, MAX_PAGE_BYTES).await?;
            return Ok(Fetched { final_url: current, body, charset });
        }
    }

    /// The site's robots.txt: missing (4xx) allows everything; a 5xx or no answer is an error.
    async fn robots(&mut self) -> Result<Robots, IngestError> {
        let url = self.start.join("/robots.txt").map_err(|error| invalid(format!("robots.txt URL: {error}")))?;
        let unavailable = |reason: String| IngestError::Input {
            path: url.to_string(),
            message: format!("robots.txt unavailable ({reason}): the site is not crawled"),
        };
        let response = self.get(&url).await.map_err(unavailable)?;
        let status = response.status();
        if status.is_client_error() || status.is_redirection() {
            return Ok(Robots::default());
        }
        if !status.is_success() {
            return Err(unavailable(format!("HTTP {status}")));
        }
        let body = self.body(response, 512 * 1024).await.map_err(unavailable)?;
        Ok(Robots::parse(&String::from_utf8_lossy(&body), CRAWLER_AGENT))
    }

    /// The pages the site's sitemaps list (robots.txt's `Sitemap` lines, else `/sitemap.xml`;
    /// a sitemap index is followed one level). A missing or broken sitemap lists nothing.
    async fn sitemap_pages(&mut self, robots: &Robots) -> Vec<Url> {
        let mut sitemaps: Vec<Url> = robots.sitemaps.iter().filter_map(|s| Url::parse(s).ok()).collect();
        if sitemaps.is_empty() {
            sitemaps.extend(self.start.join("/sitemap.xml").ok());
        }
        let mut pages = Vec::new();
        let mut read = 0;
        while let Some(sitemap) = sitemaps.pop() {
            read += 1;
            if read > 20 || !self.same_site(&sitemap) || !robots.allows(&sitemap) {
                continue;
            }
            let Ok(response) = self.get(&sitemap).await else { continue };
            if !response.status().is_success() {
                continue;
            }
            let Ok(body) = self.body(response, MAX_PAGE_BYTES).await else { continue };
            let text = String::from_utf8_lossy(&body);
            let is_index = text.contains("<sitemapindex");
            for location in sitemap_locations(&text).into_iter().filter_map(|l| Url::parse(&l).ok()) {
                if is_index && location.path().ends_with(".xml") {
                    sitemaps.push(location);
                } else {
                    pages.push(normalized(location));
                }
            }
        }
        pages
    }
}

/// A robots.txt rule: whether it allows, and its path pattern.
type Rule = (bool, String);

/// The rules of robots.txt that apply to this crawler.
#[derive(Debug, Default)]
struct Robots {
    /// The rules of the group for this crawler, else of `*`.
    rules: Vec<Rule>,
    crawl_delay: Option<Duration>,
    sitemaps: Vec<String>,
}

impl Robots {
    /// Reads robots.txt (RFC 9309): groups of `User-agent` lines and their rules; the group
    /// naming `agent` applies, else the `*` group.
    fn parse(text: &str, agent: &str) -> Robots {
        let agent = agent.to_ascii_lowercase();
        let mut robots = Robots::default();
        let (mut ours, mut star): (Option<Vec<Rule>>, Option<Vec<Rule>>) = (None, None);
        let (mut our_delay, mut star_delay) = (None, None);
        let mut group_agents: Vec<String> = Vec::new();
        let mut in_rules = false;
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or_default().trim();
            let Some((key, value)) = line.split_once(':') else { continue };
            let (key, value) = (key.trim().to_ascii_lowercase(), value.trim());
            match key.as_str() {
                "user-agent" => {
                    if in_rules {
                        group_agents.clear();
                        in_rules = false;
                    }
                    group_agents.push(value.to_ascii_lowercase());
                }
                "allow" | "disallow" | "crawl-delay" => {
                    in_rules = true;
                    let for_us = group_agents.iter().any(|a| a != "*" && agent.contains(a.as_str()));
                    let for_star = group_agents.iter().any(|a| a == "*");
                    if key == "crawl-delay" {
                        let delay = value
                            .parse::<f64>()
                            .ok()
                            .filter(|d| d.is_finite() && *d >= 0.0)
                            .map(|d| Duration::from_secs_f64(d.min(60.0)));
                        if for_us {
                            our_delay = delay;
                        } else if for_star {
                            star_delay = delay;
                        }
                        continue;
                    }
                    if value.is_empty() && key == "disallow" {
                        ours = ours.or(for_us.then(Vec::new));
                        star = star.or(for_star.then(Vec::new));
                        continue;
                    }
                    let rule = (key == "allow", value.to_string());
                    if for_us {
                        ours.get_or_insert_with(Vec::new).push(rule.clone());
                    }
                    if for_star {
                        star.get_or_insert_with(Vec::new).push(rule);
                    }
                }
                "sitemap" => robots.sitemaps.push(value.to_string()),
                _ => {}
            }
        }
        let ours_present = ours.is_some();
        robots.rules = ours.or(star).unwrap_or_default();
        robots.crawl_delay = if ours_present { our_delay } else { star_delay };
        robots
    }

    /// Whether the URL's path (and query) may be fetched: the longest matching rule decides, an
    /// `Allow` winning a tie; no matching rule allows.
    fn allows(&self, url: &Url) -> bool {
        let mut target = url.path().to_string();
        if let Some(query) = url.query() {
            target.push('?');
            target.push_str(query);
        }
        let mut best: Option<(usize, bool)> = None;
        for (allow, pattern) in &self.rules {
            if pattern_matches(pattern, &target) {
                let length = pattern.len();
                if best.is_none_or(|(best_length, best_allow)| {
                    length > best_length || (length == best_length && *allow && !best_allow)
                }) {
                    best = Some((length, *allow));
                }
            }
        }
        best.is_none_or(|(_, allow)| allow)
    }
}

/// A robots.txt path pattern: a prefix, with `*` for any characters and a final `$` for the end.
fn pattern_matches(pattern: &str, target: &str) -> bool {
    let (pattern, anchored) = match pattern.strip_suffix('$') {
        Some(pattern) => (pattern, true),
        None => (pattern, false),
    };
    let parts: Vec<&str> = pattern.split('*').collect();
    let mut position = 0;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            if !target.starts_with(part) {
                return false;
            }
            position = part.len();
            continue;
        }
        match target[position..].find(part) {
            Some(at) => position += at + part.len(),
            None => return false,
        }
    }
    if anchored {
        // The last part must end the target: with `*` before it, it may match later on.
        let last = parts.last().copied().unwrap_or_default();
        return position == target.len() || (parts.len() > 1 && target.ends_with(last));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn robots_rules_for_this_crawler_or_star() {
        let text = "User-agent: *\nDisallow: /private/\nAllow: /private/open.html\nCrawl-delay: 0.5\n\n\
                    User-agent: other-bot\nDisallow: /\n\nSitemap: https://example.org/sitemap.xml\n";
        let robots = Robots::parse(text, CRAWLER_AGENT);
        let allows = |path: &str| robots.allows(&Url::parse(&format!("https://example.org{path}")).unwrap());
        assert!(allows("/docs/a.html"));
        assert!(!allows("/private/secret.html"));
        assert!(allows("/private/open.html"));
        assert_eq!(robots.crawl_delay, Some(Duration::from_millis(500)));
        assert_eq!(robots.sitemaps, ["https://example.org/sitemap.xml"]);
        let ours = Robots::parse(
            "User-agent: *\nDisallow:\n\nUser-agent: retrieval-service-crawler\nDisallow: /\n",
            CRAWLER_AGENT,
        );
        assert!(!ours.allows(&Url::parse("https://example.org/a").unwrap()));
        assert!(pattern_matches("/*.pdf$", "/files/a.pdf"));
        assert!(!pattern_matches("/*.pdf$", "/files/a.pdf.html"));
        assert!(pattern_matches("/a*/b", "/abc/b/c"));
    }

    #[test]
    fn paths_relative_to_the_start_folder() {
        let crawler = Crawler {
            client: reqwest::Client::new(),
            limits: CrawlLimits::default(),
            bytes_read: 0,
            requests: 0,
            start: Url::parse("http://127.0.0.1:1/docs/index.html").unwrap(),
        };
        let relative = |u: &str| crawler.relative_path(&Url::parse(u).unwrap());
        assert_eq!(relative("http://127.0.0.1:1/docs/guide/install.html"), "guide/install.html");
        assert_eq!(relative("http://127.0.0.1:1/docs/guide/"), "guide/index.html");
        assert_eq!(relative("http://127.0.0.1:1/other/%D0%B0.html"), "other/а.html");
        assert!(!looks_like_page(&Url::parse("http://h/a/logo.PNG").unwrap()));
        assert!(looks_like_page(&Url::parse("http://h/a/page").unwrap()));
    }
}
