//! One instance event of the Google 2019 (v3) trace, parsed from a CSV row (with a
//! header line) or a JSON line as exported from the public BigQuery
//! `instance_events` tables.
//!
//! Columns used: `time` (microseconds), `type` (0-10 or its name), `collection_id`,
//! `instance_index`, `resource_request` (`{cpus, memory}`, normalised) and
//! `constraint` (a list of `{name, value, relation}`). Other columns (`priority`,
//! `scheduling_class`, ...) are accepted and ignored. BigQuery cannot put nested
//! fields in CSV, so a CSV export carries the request either as flattened columns
//! (`resource_request.cpus` / `resource_request_cpus`, and the same for `memory`) or
//! as one JSON-valued `resource_request` column, and the constraints as one
//! JSON-valued `constraint` column. INT64 values may be JSON strings (as BigQuery
//! writes them).

use serde_json::Value;

/// The event types of the v3 trace, numbered as in the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Submit,
    Queue,
    Enable,
    Schedule,
    Evict,
    Fail,
    Finish,
    Kill,
    Lost,
    UpdatePending,
    UpdateRunning,
}

const EVENT_NAMES: [(&str, EventType); 11] = [
    ("SUBMIT", EventType::Submit),
    ("QUEUE", EventType::Queue),
    ("ENABLE", EventType::Enable),
    ("SCHEDULE", EventType::Schedule),
    ("EVICT", EventType::Evict),
    ("FAIL", EventType::Fail),
    ("FINISH", EventType::Finish),
    ("KILL", EventType::Kill),
    ("LOST", EventType::Lost),
    ("UPDATE_PENDING", EventType::UpdatePending),
    ("UPDATE_RUNNING", EventType::UpdateRunning),
];

impl EventType {
    pub fn name(self) -> &'static str {
        EVENT_NAMES
            .iter()
            .find(|(_, t)| *t == self)
            .map_or("?", |(n, _)| n)
    }
}

/// Constraint relations, numbered as in the trace.
pub const RELATIONS: [&str; 8] = [
    "EQUAL",
    "NOT_EQUAL",
    "LESS_THAN",
    "GREATER_THAN",
    "LESS_THAN_EQUAL",
    "GREATER_THAN_EQUAL",
    "PRESENT",
    "NOT_PRESENT",
];

/// A constraint as the trace states it; `relation` indexes [`RELATIONS`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RawConstraint {
    pub name: String,
    pub relation: u8,
    pub value: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub time: u64,
    pub kind: EventType,
    pub collection_id: u64,
    pub instance_index: u32,
    /// Normalised (cpus, memory), when the event carries a usable request.
    pub request: Option<(f64, f64)>,
    pub constraints: Vec<RawConstraint>,
}

/// A malformed field: (field name, reason). Becomes a `TraceError` naming the line.
pub type FieldError = (String, String);

/// A parsed event, or the category under which the record is counted and dropped.
pub type Parsed = Result<Event, String>;

fn bad(field: &str, reason: impl Into<String>) -> FieldError {
    (field.to_owned(), reason.into())
}

/// An integer that may be a JSON number or a (possibly quoted) string.
fn int(v: Option<&Value>, field: &str) -> Result<Option<i128>, FieldError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => s
            .trim()
            .parse::<i128>()
            .map(Some)
            .map_err(|_| bad(field, format!("{s:?} is not an integer"))),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
            .map(Some)
            .ok_or_else(|| bad(field, format!("{n} is not an integer"))),
        Some(other) => Err(bad(field, format!("{other} is not an integer"))),
    }
}

fn float(v: Option<&Value>, field: &str) -> Result<Option<f64>, FieldError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => s
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(Some)
            .ok_or_else(|| bad(field, format!("{s:?} is not a number"))),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(other) => Err(bad(field, format!("{other} is not a number"))),
    }
}

fn event_type(v: Option<&Value>) -> Result<Result<EventType, String>, FieldError> {
    if let Some(Value::String(s)) = v {
        if let Some((_, t)) = EVENT_NAMES.iter().find(|(n, _)| *n == s.trim()) {
            return Ok(Ok(*t));
        }
    }
    Ok(match int(v, "type")? {
        None => Err("type: empty".to_owned()),
        Some(n) => usize::try_from(n)
            .ok()
            .and_then(|i| EVENT_NAMES.get(i))
            .map(|(_, t)| *t)
            .ok_or_else(|| "type: unknown event type".to_owned()),
    })
}

fn relation(v: Option<&Value>, field: &str) -> Result<u8, FieldError> {
    if let Some(Value::String(s)) = v {
        if let Some(i) = RELATIONS.iter().position(|r| *r == s.trim()) {
            return Ok(i as u8);
        }
    }
    match int(v, field) {
        Ok(Some(n)) if (0..RELATIONS.len() as i128).contains(&n) => Ok(n as u8),
        _ => Err(bad(
            field,
            format!("expected one of {} or 0-7", RELATIONS.join(", ")),
        )),
    }
}

fn text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn constraints(v: Option<&Value>) -> Result<Vec<RawConstraint>, FieldError> {
    let list = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(other) => return Err(bad("constraint", format!("{other} is not a list"))),
    };
    list.iter()
        .enumerate()
        .map(|(i, c)| {
            let name = text(c.get("name"));
            if name.is_empty() {
                return Err(bad(&format!("constraint[{i}].name"), "missing"));
            }
            Ok(RawConstraint {
                name,
                relation: relation(c.get("relation"), &format!("constraint[{i}].relation"))?,
                value: text(c.get("value")),
            })
        })
        .collect()
}

/// Builds an event from named values (a JSON object, or a CSV row turned into one).
pub fn from_fields(get: &dyn Fn(&str) -> Option<Value>) -> Result<Parsed, FieldError> {
    let time = match int(get("time").as_ref(), "time")? {
        None => return Ok(Err("time: empty".to_owned())),
        Some(t) if t < 0 => return Ok(Err("time: negative".to_owned())),
        Some(t) if t >= i64::MAX as i128 => return Ok(Err("time: after the trace end".to_owned())),
        Some(t) => t as u64,
    };
    let kind = match event_type(get("type").as_ref())? {
        Ok(k) => k,
        Err(why) => return Ok(Err(why)),
    };
    let collection_id = match int(get("collection_id").as_ref(), "collection_id")? {
        None => return Ok(Err("collection_id: empty".to_owned())),
        Some(c) => {
            u64::try_from(c).map_err(|_| bad("collection_id", format!("{c} is out of range")))?
        }
    };
    let instance_index = match int(get("instance_index").as_ref(), "instance_index")? {
        None => return Ok(Err("instance_index: empty".to_owned())),
        Some(i) => {
            u32::try_from(i).map_err(|_| bad("instance_index", format!("{i} is out of range")))?
        }
    };
    let request = match get("resource_request") {
        Some(Value::Object(obj)) => (
            float(obj.get("cpus"), "resource_request.cpus")?,
            float(obj.get("memory"), "resource_request.memory")?,
        ),
        _ => (
            float(
                get("resource_request.cpus").as_ref(),
                "resource_request.cpus",
            )?,
            float(
                get("resource_request.memory").as_ref(),
                "resource_request.memory",
            )?,
        ),
    };
    Ok(Ok(Event {
        time,
        kind,
        collection_id,
        instance_index,
        request: match request {
            (Some(c), Some(m)) => Some((c, m)),
            _ => None,
        },
        constraints: constraints(get("constraint").as_ref())?,
    }))
}

/// Parses one JSON line.
pub fn from_json(line: &str) -> Result<Parsed, FieldError> {
    let value: Value =
        serde_json::from_str(line).map_err(|e| bad("record", format!("not JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(bad("record", "a JSON line must hold an object"));
    };
    from_fields(&|name| obj.get(name).cloned())
}

/// Column positions of a CSV export, from its header line.
#[derive(Debug)]
pub struct CsvColumns {
    names: Vec<(String, usize)>,
}

const REQUIRED: [&str; 4] = ["time", "type", "collection_id", "instance_index"];

impl CsvColumns {
    pub fn from_header(header: &csv::StringRecord) -> Result<Self, FieldError> {
        let names: Vec<(String, usize)> = header
            .iter()
            .enumerate()
            .map(|(i, h)| {
                (
                    h.trim().replace("resource_request_", "resource_request."),
                    i,
                )
            })
            .collect();
        for req in REQUIRED {
            if !names.iter().any(|(n, _)| n == req) {
                return Err(bad(req, "missing from the header line"));
            }
        }
        Ok(CsvColumns { names })
    }

    /// Parses one CSV row. JSON-valued columns (`resource_request`, `constraint`) are
    /// decoded; every other value is passed on as text.
    pub fn parse(&self, row: &csv::StringRecord) -> Result<Parsed, FieldError> {
        let mut decoded: Vec<(&str, Value)> = Vec::with_capacity(self.names.len());
        for (name, i) in &self.names {
            let raw = row.get(*i).map(str::trim).unwrap_or("");
            let value = if raw.is_empty() {
                Value::Null
            } else if name == "constraint" || name == "resource_request" {
                serde_json::from_str(raw).map_err(|e| bad(name, format!("not JSON: {e}")))?
            } else {
                Value::String(raw.to_owned())
            };
            decoded.push((name, value));
        }
        from_fields(&|name| {
            decoded
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.clone())
        })
    }
}
