//! The knowledge bases `knowledge_id` may name (`RETR_DIFY_KNOWLEDGE_BASES`), and the little state
//! the endpoint keeps between requests (which unknown request fields were already logged).

use super::field_names::unknown_field;
use super::request::UnknownFields;
use retrieval_engine::{
    condition::{Clause, Field, Test, ValueList},
    validate_tenant, TenantId,
};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

/// One knowledge base: a tenant, a fixed filter every hit passes, and optionally a theme.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KnowledgeBase {
    pub(crate) tenant_id: TenantId,
    pub(crate) theme: Option<String>,
    pub(crate) filter: Vec<Clause>,
}

/// The knowledge bases `knowledge_id` may name (`RETR_DIFY_KNOWLEDGE_BASES`), shared by every
/// request of the endpoint (with the unknown request fields it has logged).
#[derive(Debug, Clone, Default)]
pub(crate) struct KnowledgeBases {
    /// `None`: no file; every tenant is a knowledge base under its own id.
    bases: Option<HashMap<String, KnowledgeBase>>,
    unknown_fields: Arc<UnknownFields>,
}

/// `RETR_DIFY_KNOWLEDGE_BASES` as written:
/// ```yaml
/// knowledge_bases:
///   adguard-windows:            # the knowledge_id Dify sends
///     tenant_id: adguard
///     filter: {platform: windows, tags: [setup]}   # every hit passes each (a list: any of)
///     theme: windows            # optional: the search is filtered to this theme
/// ```
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KnowledgeFile {
    knowledge_bases: BTreeMap<String, KnowledgeEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KnowledgeEntry {
    tenant_id: String,
    #[serde(default, deserialize_with = "retrieval_engine::yaml::empty_as_default")]
    filter: BTreeMap<String, OneOrMany>,
    theme: Option<String>,
    /// For the people who read the file; not used.
    #[allow(dead_code)]
    description: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl KnowledgeBases {
    /// Knowledge bases that name nothing: where a configured file cannot be used, refuse.
    pub(crate) fn none() -> Self {
        Self { bases: Some(HashMap::new()), unknown_fields: Arc::default() }
    }

    /// Reads the file; an empty path means every tenant is a knowledge base.
    pub(crate) fn load(path: &Path) -> Result<Self, String> {
        if path.as_os_str().is_empty() {
            return Ok(Self::default());
        }
        let text = std::fs::read_to_string(path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        Self::parse(&text).map_err(|error| format!("{}: {error}", path.display()))
    }

    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let file: KnowledgeFile = retrieval_engine::yaml::from_str(text).map_err(|error| error.to_string())?;
        let mut bases = HashMap::with_capacity(file.knowledge_bases.len());
        for (id, entry) in file.knowledge_bases {
            validate_tenant(&id).map_err(|error| format!("knowledge base id {id:?}: {error}"))?;
            let tenant_id = TenantId::new(entry.tenant_id).map_err(|error| format!("{id}: {error}"))?;
            let mut filter = Vec::with_capacity(entry.filter.len());
            for (name, wanted) in entry.filter {
                let field = Field::parse(&name).ok_or_else(|| format!("{id}: filter: {}", unknown_field(&name)))?;
                filter.push(Clause::Field(
                    field,
                    match wanted {
                        OneOrMany::One(value) => Test::Is(value),
                        OneOrMany::Many(values) if !values.is_empty() => Test::In(ValueList::new(values)),
                        OneOrMany::Many(_) => {
                            return Err(format!("{id}: filter.{name}: an empty list matches nothing"))
                        }
                    },
                ));
            }
            bases.insert(id, KnowledgeBase { tenant_id, theme: entry.theme, filter });
        }
        if bases.is_empty() {
            return Err("no knowledge base in the file (every knowledge_id would be refused)".into());
        }
        Ok(Self { bases: Some(bases), unknown_fields: Arc::default() })
    }

    /// The knowledge base `knowledge_id` names, if any.
    pub(crate) fn resolve(&self, knowledge_id: &str) -> Option<KnowledgeBase> {
        match &self.bases {
            Some(bases) => bases.get(knowledge_id).cloned(),
            None => TenantId::new(knowledge_id).ok().map(|tenant_id| KnowledgeBase {
                tenant_id,
                theme: None,
                filter: Vec::new(),
            }),
        }
    }

    /// The request fields this version does not read, each logged once.
    pub(crate) fn unknown_fields(&self) -> &UnknownFields {
        &self.unknown_fields
    }

    /// One problem per knowledge base that names a theme `themes` does not define: start-up
    /// refuses them, and a config reload keeps the themes in use.
    pub(crate) fn themes_missing_from(&self, themes: &retrieval_engine::ThemeSet) -> Vec<String> {
        self.bases
            .iter()
            .flatten()
            .filter_map(|(id, base)| Some((id, base.theme.as_deref()?)))
            .filter(|(_, theme)| !themes.iter().any(|known| known.id == *theme))
            .map(|(knowledge_id, theme)| {
                format!(
                    "RETR_DIFY_KNOWLEDGE_BASES: knowledge base {knowledge_id:?} names the theme {theme:?}, which \
                     RETR_THEMES_PATH does not define"
                )
            })
            .collect()
    }
}
