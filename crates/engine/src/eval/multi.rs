//! The report of a page-level run over several question files: each file's scores per router
//! mode (`pages`), then the out-of-fold figures over all of them (`crossval`).

use super::crossval::{CrossValidation, Labelled};
use super::pages::{aggregate, ModeScores, PageQuestion, PagesReport, QuestionOutcome};

/// Every question file's scores per mode, then the out-of-fold figures over all of them.
#[derive(Debug, Clone)]
pub struct MultiReport {
    pub reports: Vec<PagesReport>,
    /// (file, its index group, scores per mode).
    pub per_file: Vec<(String, usize, Vec<ModeScores>)>,
    pub cross: CrossValidation,
}

impl std::fmt::Display for MultiReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (file, group, modes) in &self.per_file {
            let docs = self.reports.get(*group).map_or(0, |r| r.docs);
            let questions = modes.first().map_or(0, |m| m.questions);
            let report =
                PagesReport { questions, docs, modes: modes.clone(), failures_path: None, outcomes: Vec::new() };
            writeln!(f, "== {file}")?;
            writeln!(f, "{report}")?;
        }
        for report in &self.reports {
            if let Some(path) = &report.failures_path {
                writeln!(f, "misses with their hits: {path}")?;
            }
        }
        write!(f, "{}", self.cross)
    }
}

/// The scores of each question file in each mode (`outcomes[m][i]` is question `i` in mode `m`).
pub fn per_file_scores(
    questions: &[Labelled],
    modes: &[String],
    outcomes: &[Vec<QuestionOutcome>],
) -> Vec<(String, usize, Vec<ModeScores>)> {
    let mut files: Vec<(String, usize)> = Vec::new();
    for labelled in questions {
        if !files.iter().any(|(file, _)| *file == labelled.file) {
            files.push((labelled.file.clone(), labelled.group));
        }
    }
    files
        .into_iter()
        .map(|(file, group)| {
            let members: Vec<usize> = (0..questions.len()).filter(|&i| questions[i].file == file).collect();
            let asked: Vec<PageQuestion> = members.iter().map(|&i| questions[i].question.clone()).collect();
            let scores = modes
                .iter()
                .zip(outcomes)
                .map(|(mode, outcomes)| {
                    let picked: Vec<QuestionOutcome> = members.iter().map(|&i| outcomes[i].clone()).collect();
                    aggregate(mode, &asked, &picked)
                })
                .collect();
            (file, group, scores)
        })
        .collect()
}
