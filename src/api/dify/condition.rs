//! Dify's `metadata_condition` compiled to a `MetadataCondition` checked on every candidate record.
//!
//! - Our field names, and Dify's built-in ones where they mean something here: `document_name` is
//!   the title, `upload_date` and `last_update_date` are `indexed_at`. Dify's built-in `source`
//!   (the upload channel) shares its name with ours (the source file), whose values are paths, so
//!   Dify's channel names match nothing.
//! - Any other name (`uploader`, a metadata field a Dify user defined: `author`, `category`, …)
//!   is a field no record has, read as Dify's own filter reads a field a document lacks (SQL on a
//!   `NULL`): `empty` passes every record, every other test none (`is not`, `not contains` and
//!   `not in` included), so under `and` nothing passes and under `or` the other conditions decide.
//!   Its value is still checked as the operator's kind of field would check it.
//! - A condition whose `value` is `null` or absent is a blank filter row: ignored, as Dify ignores
//!   it (`empty`/`not empty` take no value). No condition left: nothing is filtered.
//! - Dates compare as instants (Unix seconds as Dify's date picker sends them, `YYYY-MM-DD` or
//!   RFC 3339): `is` is the same second, `before`/`after` strictly earlier/later.
//! - A name that is no field name (empty, over `MAX_NAME_CHARS`, control characters), an unknown
//!   operator, or a value of the wrong kind is a 422, never a wider search.

use super::field_names::{all_names, is_date, number_names, target, Target, MAX_NAME_CHARS};
use super::request::{DifyCondition, DifyMetadataCondition, LogicalOperator};
use super::DifyError;
use retrieval_engine::{
    condition::{unix_seconds, Clause, Comparison, Field, Logic, MetadataCondition, Number, Test, ValueList},
    MAX_ID_LIST, MAX_TAG_CHARS,
};
use serde_json::{json, Value};

/// Most conditions one `metadata_condition` may hold (blank ones included).
pub(crate) const MAX_CONDITIONS: usize = 64;

/// The operators by the kind of value they take (the OpenAPI document says the same).
pub(crate) const TEXT_OPERATORS: [&str; 4] = ["contains", "not contains", "start with", "end with"];
pub(crate) const EQUALITY_OPERATORS: [&str; 2] = ["is", "is not"];
pub(crate) const LIST_OPERATORS: [&str; 2] = ["in", "not in"];
pub(crate) const PRESENCE_OPERATORS: [&str; 2] = ["empty", "not empty"];
pub(crate) const NUMBER_OPERATORS: [&str; 6] = ["=", "≠", ">", "<", "≥", "≤"];
/// On a date field (`indexed_at` and its Dify names), `is` and `is not` compare instants too.
pub(crate) const DATE_OPERATORS: [&str; 4] = ["before", "after", "is", "is not"];

/// Compiles Dify's `metadata_condition`: `None` when no condition is left to check.
pub(crate) fn compile(condition: &DifyMetadataCondition) -> Result<Option<MetadataCondition>, DifyError> {
    let conditions = condition.conditions.as_deref().unwrap_or_default();
    if conditions.len() > MAX_CONDITIONS {
        return Err(DifyError::invalid(format!(
            "metadata_condition.conditions: at most {MAX_CONDITIONS} conditions, got {}",
            conditions.len()
        )));
    }
    let logic = match condition.logical_operator {
        Some(LogicalOperator::Or) => Logic::Any,
        Some(LogicalOperator::And) | None => Logic::All,
    };
    let mut clauses = Vec::with_capacity(conditions.len());
    for (index, item) in conditions.iter().enumerate() {
        let compiled = compile_one(item)
            .map_err(|message| DifyError::invalid(format!("metadata_condition.conditions[{index}]: {message}")))?;
        clauses.extend(compiled);
    }
    Ok((!clauses.is_empty()).then_some(MetadataCondition { logic, clauses }))
}

/// A clause no record passes (`doc_id in []`), and one every record passes (`doc_id not in []`).
fn never() -> Clause {
    Clause::Field(Field::DocId, Test::In(ValueList::default()))
}

fn always() -> Clause {
    Clause::Field(Field::DocId, Test::NotIn(ValueList::default()))
}

/// One condition; `None` for a blank one (no value where the operator takes one). The name and
/// the operator are checked first: a blank row must still name a field and an operator that fit.
fn compile_one(condition: &DifyCondition) -> Result<Option<Clause>, String> {
    let name = match &condition.name {
        Value::String(name) => name.as_str(),
        Value::Array(names) => match names.as_slice() {
            [Value::String(name)] => name.as_str(),
            _ => return Err("name: one field name (a string, or a list of exactly one)".into()),
        },
        _ => return Err("name: a field name is a string".into()),
    };
    let target = target(name)?;
    let operator = condition.comparison_operator.as_str();
    // A field no record has is checked as a field of the operator's kind (so its value is read as
    // that kind's), then passes `empty` only.
    let field = match target {
        Target::Field(field) => field,
        Target::Absent if NUMBER_OPERATORS.contains(&operator) => Field::Product,
        Target::Absent if ["before", "after"].contains(&operator) => Field::IndexedAt,
        Target::Absent => Field::Title,
    };
    check_operator(name, field, operator)?;
    let value = condition.value.as_ref().filter(|value| !value.is_null());
    if value.is_none() && !PRESENCE_OPERATORS.contains(&operator) {
        return Ok(None);
    }
    let clause = test(field, operator, value)?;
    Ok(Some(match target {
        Target::Field(_) => clause,
        Target::Absent if operator == "empty" => always(),
        Target::Absent => never(),
    }))
}

/// An operator this service knows, of a family that applies to `field` (called `name`).
fn check_operator(name: &str, field: Field, operator: &str) -> Result<(), String> {
    if NUMBER_OPERATORS.contains(&operator) && matches!(field, Field::Tags | Field::IndexedAt) {
        return Err(format!("`{operator}` compares numbers; `{name}` holds none"));
    }
    if ["before", "after"].contains(&operator) && field != Field::IndexedAt {
        return Err(format!(
            "`{operator}` compares dates; the date field is `indexed_at` (Dify: `upload_date`, \
             `last_update_date`), not `{name}`"
        ));
    }
    let families = [&TEXT_OPERATORS[..], &EQUALITY_OPERATORS, &LIST_OPERATORS, &PRESENCE_OPERATORS, &NUMBER_OPERATORS];
    if families.iter().any(|family| family.contains(&operator)) || DATE_OPERATORS.contains(&operator) {
        return Ok(());
    }
    let all = [families.concat(), vec!["before", "after"]].concat().join(", ");
    Err(format!("unsupported comparison_operator {operator:?}; the operators are {all}"))
}

fn test(field: Field, operator: &str, value: Option<&Value>) -> Result<Clause, String> {
    let bounded = |text: &str| -> Result<String, String> {
        if text.chars().count() > MAX_TAG_CHARS {
            return Err(format!("value: at most {MAX_TAG_CHARS} characters"));
        }
        Ok(text.to_string())
    };
    let text = || -> Result<String, String> {
        match value {
            Some(Value::String(text)) => bounded(text),
            Some(Value::Number(number)) => Ok(number.to_string()),
            _ => Err(format!("value: `{operator}` takes a string or a number")),
        }
    };
    let list = || -> Result<Vec<String>, String> {
        match value {
            Some(Value::Array(items)) if items.len() <= MAX_ID_LIST => items
                .iter()
                .map(|item| match item {
                    Value::String(text) => bounded(text),
                    _ => Err(format!("value: `{operator}` takes a list of strings")),
                })
                .collect(),
            Some(Value::Array(_)) => Err(format!("value: at most {MAX_ID_LIST} items")),
            // A string is a comma-separated list (as Dify's own filters read `in`).
            Some(Value::String(text)) => Ok(bounded(text)?.split(',').map(|item| item.trim().to_string()).collect()),
            _ => Err(format!("value: `{operator}` takes a list of strings")),
        }
    };
    let number = || -> Result<Number, String> {
        match value {
            Some(Value::Number(number)) => Ok(Number::of_json(field, number)),
            Some(Value::String(text)) if Number::is_version_text(text.strip_suffix('\n').unwrap_or(text)) => {
                Number::parse(field, text).ok_or_else(|| format!("value: {text:?} is not a number"))
            }
            _ => Err(format!("value: `{operator}` takes a number or a version (`1.10`)")),
        }
    };
    let instant = || -> Result<i64, String> {
        let parsed = match value {
            Some(Value::Number(number)) => number.as_f64().map(|seconds| seconds.floor() as i64),
            Some(Value::String(text)) => unix_seconds(text),
            _ => None,
        };
        parsed.ok_or_else(|| format!("value: `{operator}` takes a date (Unix seconds, YYYY-MM-DD or RFC 3339)"))
    };
    let on_field = |test: Test| Clause::Field(field, test);
    let group = |logic: Logic, clauses: Vec<Clause>| Clause::Group(MetadataCondition { logic, clauses });
    let clause = match operator {
        "contains" => on_field(Test::Contains(text()?.to_lowercase())),
        "not contains" => on_field(Test::NotContains(text()?.to_lowercase())),
        "start with" => on_field(Test::StartsWith(text()?.to_lowercase())),
        "end with" => on_field(Test::EndsWith(text()?.to_lowercase())),
        // The same second: neither before nor after it (the records' dates count whole seconds).
        "is" if is_date(Some(field)) => {
            let at = instant()?;
            group(
                Logic::All,
                vec![on_field(Test::After(at.saturating_sub(1))), on_field(Test::Before(at.saturating_add(1)))],
            )
        }
        "is not" if is_date(Some(field)) => {
            let at = instant()?;
            group(Logic::Any, vec![on_field(Test::Before(at)), on_field(Test::After(at))])
        }
        "is" => on_field(Test::Is(text()?)),
        "is not" => on_field(Test::IsNot(text()?)),
        "in" => on_field(Test::In(ValueList::new(list()?))),
        "not in" => on_field(Test::NotIn(ValueList::new(list()?))),
        "empty" => on_field(Test::Empty),
        "not empty" => on_field(Test::NotEmpty),
        "=" => on_field(Test::Compare(Comparison::Equal, number()?)),
        "≠" => on_field(Test::Compare(Comparison::NotEqual, number()?)),
        ">" => on_field(Test::Compare(Comparison::Greater, number()?)),
        "<" => on_field(Test::Compare(Comparison::Less, number()?)),
        "≥" => on_field(Test::Compare(Comparison::GreaterOrEqual, number()?)),
        "≤" => on_field(Test::Compare(Comparison::LessOrEqual, number()?)),
        "before" => on_field(Test::Before(instant()?)),
        "after" => on_field(Test::After(instant()?)),
        other => return Err(format!("unsupported comparison_operator {other:?}")),
    };
    Ok(clause)
}

/// The schema of one condition: one shape per family of operators, so that what the document
/// calls valid is exactly what `compile_one` accepts. Each family takes the names of our fields
/// it applies to and any other field name (a field no record has).
pub(crate) fn condition_schema() -> Value {
    let every: Vec<&str> = all_names().map(|(name, _)| name).collect();
    let other = json!({"type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS,
        "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]*$", "not": {"enum": every}});
    let names = |names: Vec<&str>, others: bool| {
        let mut one = vec![json!({"type": "string", "enum": names})];
        if others {
            one.push(other.clone());
        }
        json!({"oneOf": [
            {"oneOf": one.clone()},
            {"type": "array", "items": {"oneOf": one}, "minItems": 1, "maxItems": 1},
        ]})
    };
    let dates: Vec<&str> = all_names().filter(|(_, field)| is_date(*field)).map(|(name, _)| name).collect();
    let absent: Vec<&str> = all_names().filter(|(_, field)| field.is_none()).map(|(name, _)| name).collect();
    let not_dates: Vec<&str> = all_names().filter(|(_, field)| !is_date(*field)).map(|(name, _)| name).collect();
    let text = json!({"type": "string", "maxLength": MAX_TAG_CHARS});
    let blank = json!({"type": "null"});
    let date = json!({"anyOf": [{"type": "number"}, {"type": "string", "format": "date-time"},
        {"type": "string", "format": "date"}, blank]});
    let family = |operators: &[&str], name: Value, value: Value| {
        json!({"type": "object", "required": ["name", "comparison_operator"], "properties": {
            "name": name, "comparison_operator": {"type": "string", "enum": operators}, "value": value}})
    };
    json!({"oneOf": [
        family(&TEXT_OPERATORS, names(every.clone(), true), json!({"oneOf": [text, {"type": "number"}, blank]})),
        family(&EQUALITY_OPERATORS, names(not_dates, true), json!({"oneOf": [text, {"type": "number"}, blank]})),
        family(&LIST_OPERATORS, names(every.clone(), true), json!({"oneOf": [
            {"type": "array", "items": text, "maxItems": MAX_ID_LIST}, text, blank]})),
        family(&PRESENCE_OPERATORS, names(every, true), json!({})),
        family(&NUMBER_OPERATORS, names(number_names(), true), json!({"oneOf": [{"type": "number"},
            {"type": "string", "pattern": "^[vV]?[0-9]{1,18}(\\.[0-9]{1,18})*$"}, blank]})),
        family(&DATE_OPERATORS, names(dates, false), date.clone()),
        family(&["before", "after"], names(absent, true), date),
    ]})
}
