//! Routes queries with the heuristic router and prints the result; with `--jsonl` measures a
//! labelled question file (`{"query","platform","ambiguous"}` per line, e.g. the AdGuard dev set).
//!
//! cargo run --example route_queries -- config/themes.yaml "как подключить Android SDK через gradle"
//! cargo run --example route_queries -- config/themes-adguard.yaml --jsonl ../shared/corpora/adguard-kb-ru/dev_questions.jsonl

use retrieval_engine::{route_heuristic, Theme, ThemeSet, ThemesProvider, YamlThemesProvider};
use serde::Deserialize;

#[derive(Deserialize)]
struct Question {
    #[serde(default)]
    id: String,
    query: String,
    platform: Option<String>,
    #[serde(default)]
    ambiguous: bool,
}

fn platform_of<'a>(themes: &'a [Theme], theme_id: Option<&str>) -> Option<&'a str> {
    themes.iter().find(|theme| Some(theme.id.as_str()) == theme_id).and_then(|theme| theme.platform.as_deref())
}

fn measure(provider: &YamlThemesProvider, path: &str) -> Result<(), Box<dyn std::error::Error>> {
    let themes = ThemeSet::new(provider.list_themes());
    let questions: Vec<Question> = std::fs::read_to_string(path)?
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let (mut platform_total, mut platform_right, mut platform_filtered, mut platform_filtered_wrong) = (0, 0, 0, 0);
    let (mut ambiguous_total, mut ambiguous_flagged) = (0, 0);
    let (mut clear_total, mut clear_flagged) = (0, 0);
    for question in &questions {
        let routing = themes.route_heuristic(&question.query, None, provider.router_config());
        let primary_platform = platform_of(&themes, routing.primary_theme.as_deref());
        let specific = question.platform.as_deref().filter(|platform| *platform != "general");
        let mut verdict = String::new();
        if let Some(expected) = specific {
            platform_total += 1;
            let right = primary_platform == Some(expected);
            platform_right += usize::from(right);
            if let Some(filter) = &routing.hard_filter {
                platform_filtered += 1;
                platform_filtered_wrong += usize::from(filter.platform.as_deref() != Some(expected));
            }
            verdict.push_str(if right { "platform ok" } else { "PLATFORM MISS" });
        }
        if question.ambiguous {
            ambiguous_total += 1;
            ambiguous_flagged += usize::from(routing.requires_disambiguation);
            verdict.push_str(if routing.requires_disambiguation { " ambiguity ok" } else { " AMBIGUITY MISSED" });
        } else {
            clear_total += 1;
            clear_flagged += usize::from(routing.requires_disambiguation);
            if routing.requires_disambiguation {
                verdict.push_str(" WRONGLY ASKS");
            }
        }
        println!(
            "{:5} {:<28} primary={:<26} filter={:<5} ask={:<5} {}",
            question.id,
            verdict.trim(),
            routing.primary_theme.as_deref().unwrap_or("-"),
            routing.hard_filter.is_some(),
            routing.requires_disambiguation,
            question.query
        );
    }
    println!();
    println!("platform-specific questions with the right platform as primary: {platform_right}/{platform_total}");
    println!("  of which hard-filtered: {platform_filtered} (to a wrong platform: {platform_filtered_wrong})");
    println!("ambiguous questions with requires_disambiguation: {ambiguous_flagged}/{ambiguous_total}");
    println!("non-ambiguous questions wrongly requiring disambiguation: {clear_flagged}/{clear_total}");
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(themes_path) = args.first() else {
        return Err("usage: route_queries <themes.yaml> (--jsonl <questions.jsonl> | <query>...)".into());
    };
    let provider = YamlThemesProvider::try_load(themes_path)?;
    if args.get(1).map(String::as_str) == Some("--jsonl") {
        let path = args.get(2).ok_or("--jsonl needs a file")?;
        return measure(&provider, path);
    }
    for query in &args[1..] {
        let routing = route_heuristic(query, None, &provider.list_themes(), provider.router_config());
        println!("{query}\n{}", serde_json::to_string_pretty(&routing)?);
    }
    Ok(())
}
