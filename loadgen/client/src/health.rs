//! What the GM's view cannot say about nodes and LMs, from the LMs' own node lists
//! (`GET /v1/cluster`): which nodes are down (their worker was lost) or drained (an
//! operator took them out of service), and which LMs are not ready or did not
//! answer. `megha nodes` and `megha top` mark them. Pure (tested on sample answers).

use serde_json::Value;
use std::collections::BTreeMap;

/// The marks of one `GET /v1/cluster` answer.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Marks {
    /// (LM, node) -> "down", "drained" or "down, drained".
    nodes: BTreeMap<(u64, u64), String>,
    /// LM -> "not ready" or "unreachable: ...".
    lms: BTreeMap<u64, String>,
}

impl Marks {
    /// The marks of `cluster` (the answer of `GET /v1/cluster`); none without one.
    pub fn of(cluster: Option<&Value>) -> Marks {
        let mut marks = Marks::default();
        let Some(cluster) = cluster else {
            return marks;
        };
        for lm in cluster["lms"].as_array().into_iter().flatten() {
            let Some(id) = lm["lm"].as_u64() else {
                continue;
            };
            if let Some(error) = lm["error"].as_str() {
                marks.lms.insert(id, format!("unreachable: {error}"));
                continue;
            }
            let state = &lm["state"];
            if state["ready"] == Value::Bool(false) {
                marks.lms.insert(id, "not ready".into());
            }
            for n in state["nodes"].as_array().into_iter().flatten() {
                let Some(node) = n["node"].as_u64() else {
                    continue;
                };
                let flags: Vec<&str> = [("down", "down"), ("drained", "drained")]
                    .into_iter()
                    .filter(|(key, _)| n[*key] == Value::Bool(true))
                    .map(|(_, word)| word)
                    .collect();
                if !flags.is_empty() {
                    marks.nodes.insert((id, node), flags.join(", "));
                }
            }
        }
        marks
    }

    /// The node's mark, if it is down or drained.
    pub fn node(&self, lm: &Value, node: &Value) -> Option<&str> {
        let key = (lm.as_u64()?, node.as_u64()?);
        self.nodes.get(&key).map(String::as_str)
    }

    /// The LM's mark, if it is not ready or did not answer.
    pub fn lm(&self, lm: &Value) -> Option<&str> {
        self.lms.get(&lm.as_u64()?).map(String::as_str)
    }

    /// How many of the LM's nodes are down and how many drained.
    pub fn counts(&self, lm: &Value) -> (u64, u64) {
        let Some(lm) = lm.as_u64() else {
            return (0, 0);
        };
        let of = |word: &str| {
            (self.nodes.range((lm, 0)..=(lm, u64::MAX)))
                .filter(|(_, m)| m.contains(word))
                .count() as u64
        };
        (of("down"), of("drained"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn down_and_drained_nodes_and_lms_not_ready_or_unreachable_are_marked() {
        let cluster = json!({"lms": [
            {"lm": 0, "url": "http://lm0", "state": {"ready": true, "nodes": [
                {"node": 0, "down": false, "drained": false},
                {"node": 1, "down": true, "drained": false},
                {"node": 2, "down": false, "drained": true},
                {"node": 3, "down": true, "drained": true}]}},
            {"lm": 1, "url": "http://lm1", "state": {"ready": false, "nodes": []}},
            {"lm": 2, "url": "http://lm2", "error": "connection refused"}]});
        let m = Marks::of(Some(&cluster));
        assert_eq!(m.node(&json!(0), &json!(0)), None);
        assert_eq!(m.node(&json!(0), &json!(1)), Some("down"));
        assert_eq!(m.node(&json!(0), &json!(2)), Some("drained"));
        assert_eq!(m.node(&json!(0), &json!(3)), Some("down, drained"));
        assert_eq!(m.counts(&json!(0)), (2, 2));
        assert_eq!(m.lm(&json!(0)), None);
        assert_eq!(m.lm(&json!(1)), Some("not ready"));
        assert_eq!(m.lm(&json!(2)), Some("unreachable: connection refused"));
        assert_eq!(Marks::of(None), Marks::default());
    }
}
