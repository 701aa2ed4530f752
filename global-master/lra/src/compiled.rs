//! A placement problem compiled into dense indices, shared by every placer and by
//! the metrics: the distinct tag sets ("patterns") the constraints mention, the
//! (pattern, node group) pairs whose per-node-set counts matter ("keys"), each
//! container reduced to the patterns it matches, and the counts contributed by the
//! containers already running.

use super::constraints::PlacementConstraint;
use super::model::{ClusterState, Tag, TagSet};
use super::request::LraRequest;
use common::Resources;
use std::collections::{HashMap, HashSet};

/// `max` of an atom without an upper bound.
pub(crate) const UNBOUNDED: u32 = u32::MAX;

/// A (pattern, node group) pair whose containers are counted per node set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub pattern: usize,
    pub group: usize,
}

/// One tag constraint: the count of `key` in the subject's node set, excluding the
/// subject itself, must lie in `min..=max`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Atom {
    pub key: usize,
    pub min: u32,
    pub max: u32,
    /// Counts the rule's subjects in the same node group.
    pub subject_key: usize,
    pub rule: usize,
}

impl Atom {
    /// Affinity `(≥1, ∞)` or anti-affinity `(0, 0)`: what Kubernetes can express.
    pub fn is_affinity_like(&self) -> bool {
        (self.min >= 1 && self.max == UNBOUNDED) || (self.min == 0 && self.max == 0)
    }
}

/// One placement constraint in compiled form (DNF over atoms).
#[derive(Clone, Debug)]
pub(crate) struct Rule {
    pub subject: usize,
    pub clauses: Vec<Vec<usize>>,
    pub weight: f64,
}

/// A container reduced to what placement needs.
#[derive(Clone, Debug)]
pub(crate) struct Item {
    pub resources: Resources,
    /// Sorted ids of the patterns this container matches.
    pub matches: Vec<usize>,
}

impl Item {
    pub fn matches(&self, pattern: usize) -> bool {
        self.matches.binary_search(&pattern).is_ok()
    }
}

#[derive(Debug)]
pub(crate) struct Compiled {
    pub patterns: Vec<TagSet>,
    pub keys: Vec<Key>,
    pub atoms: Vec<Atom>,
    pub rules: Vec<Rule>,
    /// pattern -> rules whose subject it is.
    pub rules_by_subject: Vec<Vec<usize>>,
    /// pattern -> keys counting it.
    pub keys_by_pattern: Vec<Vec<usize>>,
    /// key -> atoms counting it.
    pub atoms_by_key: Vec<Vec<usize>>,
    /// Per LRA of the batch, per container.
    pub new: Vec<Vec<Item>>,
    /// Running containers that match at least one pattern, with their node.
    pub deployed: Vec<(usize, Item)>,
    /// The application of each entry of `deployed`.
    pub deployed_lra: Vec<Option<super::model::LraId>>,
    /// `base[key][set]`: running containers counted by `key` in each node set.
    pub base: Vec<Vec<u32>>,
}

struct Interner {
    patterns: Vec<TagSet>,
    ids: HashMap<TagSet, usize>,
}

impl Interner {
    fn id(&mut self, tags: &TagSet) -> usize {
        if let Some(&id) = self.ids.get(tags) {
            return id;
        }
        let id = self.patterns.len();
        self.patterns.push(tags.clone());
        self.ids.insert(tags.clone(), id);
        id
    }
}

/// Compiles `constraints` (already validated against `cluster`'s groups) for placing
/// `lras`. With `only_relevant`, constraints that neither constrain nor count a
/// container of `lras` are left out: nothing the placer does can change them.
pub(crate) fn compile(
    cluster: &ClusterState,
    lras: &[LraRequest],
    constraints: &[PlacementConstraint],
    only_relevant: bool,
) -> Compiled {
    let new_tags: Vec<Vec<Vec<Tag>>> = lras
        .iter()
        .map(|l| {
            (0..l.containers.len())
                .map(|j| l.container_tags(j))
                .collect()
        })
        .collect();
    let all_new: HashSet<&Tag> = new_tags.iter().flatten().flatten().collect();
    let touches_new = |set: &TagSet| {
        set.tags().iter().all(|t| all_new.contains(t))
            && new_tags.iter().flatten().any(|tags| set.matches(tags))
    };
    let groups = cluster.groups();
    let mut interner = Interner {
        patterns: Vec::new(),
        ids: HashMap::new(),
    };
    let mut keys: Vec<Key> = Vec::new();
    let mut key_ids: HashMap<Key, usize> = HashMap::new();
    let mut atoms = Vec::new();
    let mut rules = Vec::new();
    for c in constraints {
        let relevant = !only_relevant
            || touches_new(&c.subject)
            || c.any_of.iter().flatten().any(|tc| touches_new(&tc.c_tag));
        if !relevant {
            continue;
        }
        let subject = interner.id(&c.subject);
        let mut clauses = Vec::new();
        for clause in &c.any_of {
            let mut ids = Vec::new();
            for tc in clause {
                // Unknown groups were refused by validation; skip defensively.
                let Some(group) = groups.find(&tc.node_group) else {
                    continue;
                };
                let mut key_of = |pattern: usize| {
                    let key = Key { pattern, group };
                    let next = keys.len();
                    *key_ids.entry(key).or_insert_with(|| {
                        keys.push(key);
                        next
                    })
                };
                let key = key_of(interner.id(&tc.c_tag));
                let subject_key = key_of(subject);
                ids.push(atoms.len());
                atoms.push(Atom {
                    key,
                    min: tc.c_min,
                    max: tc.c_max.unwrap_or(UNBOUNDED),
                    subject_key,
                    rule: rules.len(),
                });
            }
            clauses.push(ids);
        }
        rules.push(Rule {
            subject,
            clauses,
            weight: c.weight,
        });
    }
    let patterns = interner.patterns;
    let mut rules_by_subject = vec![Vec::new(); patterns.len()];
    for (r, rule) in rules.iter().enumerate() {
        rules_by_subject[rule.subject].push(r);
    }
    let mut keys_by_pattern = vec![Vec::new(); patterns.len()];
    for (k, key) in keys.iter().enumerate() {
        keys_by_pattern[key.pattern].push(k);
    }
    let mut atoms_by_key = vec![Vec::new(); keys.len()];
    for (a, atom) in atoms.iter().enumerate() {
        atoms_by_key[atom.key].push(a);
    }
    // Index patterns by their first tag: a container can only match a pattern whose
    // first tag it carries.
    let mut by_first: HashMap<&Tag, Vec<usize>> = HashMap::new();
    for (p, pattern) in patterns.iter().enumerate() {
        if let Some(first) = pattern.tags().first() {
            by_first.entry(first).or_default().push(p);
        }
    }
    let matches_of = |tags: &[Tag]| -> Vec<usize> {
        let mut out: Vec<usize> = tags
            .iter()
            .filter_map(|t| by_first.get(t))
            .flatten()
            .copied()
            .filter(|&p| patterns[p].matches(tags))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    };
    let new = lras
        .iter()
        .zip(&new_tags)
        .map(|(l, tags)| {
            l.containers
                .iter()
                .zip(tags)
                .map(|(c, t)| Item {
                    resources: c.resources,
                    matches: matches_of(t),
                })
                .collect()
        })
        .collect();
    let mut base: Vec<Vec<u32>> = keys
        .iter()
        .map(|k| vec![0; groups.set_count(k.group)])
        .collect();
    let mut deployed = Vec::new();
    let mut deployed_lra = Vec::new();
    for (n, node) in cluster.nodes().iter().enumerate() {
        for c in &node.containers {
            let matches = matches_of(&c.tags);
            if matches.is_empty() {
                continue;
            }
            for &p in &matches {
                for &k in &keys_by_pattern[p] {
                    base[k][groups.set_of(keys[k].group, n)] += 1;
                }
            }
            deployed_lra.push(c.lra);
            deployed.push((
                n,
                Item {
                    resources: c.resources,
                    matches,
                },
            ));
        }
    }
    Compiled {
        patterns,
        keys,
        atoms,
        rules,
        rules_by_subject,
        keys_by_pattern,
        atoms_by_key,
        new,
        deployed,
        deployed_lra,
        base,
    }
}

impl Compiled {
    /// Adds (`delta = 1`) or removes (`delta = -1`) `item` on `node` in `counts`.
    pub fn count(
        &self,
        cluster: &ClusterState,
        counts: &mut [Vec<u32>],
        item: &Item,
        node: usize,
        add: bool,
    ) {
        for &p in &item.matches {
            for &k in &self.keys_by_pattern[p] {
                let slot = &mut counts[k][cluster.groups().set_of(self.keys[k].group, node)];
                *slot = if add {
                    *slot + 1
                } else {
                    slot.saturating_sub(1)
                };
            }
        }
    }

    /// True when atom `a` holds for a subject `item` on `node` under `counts`.
    pub fn atom_holds(
        &self,
        cluster: &ClusterState,
        counts: &[Vec<u32>],
        item: &Item,
        node: usize,
        a: usize,
    ) -> bool {
        let atom = self.atoms[a];
        let key = self.keys[atom.key];
        let set = cluster.groups().set_of(key.group, node);
        let mut count = counts[atom.key][set];
        if item.matches(key.pattern) {
            count = count.saturating_sub(1);
        }
        count >= atom.min && count <= atom.max
    }

    /// The total weight of the rules `item` on `node` violates under `counts`
    /// (counts include the item itself), and how many rules that is.
    pub fn violated(
        &self,
        cluster: &ClusterState,
        counts: &[Vec<u32>],
        item: &Item,
        node: usize,
    ) -> (f64, usize) {
        let mut weight = 0.0;
        let mut n = 0;
        for &p in &item.matches {
            for &r in &self.rules_by_subject[p] {
                let rule = &self.rules[r];
                let ok = rule.clauses.iter().any(|cl| {
                    cl.iter()
                        .all(|&a| self.atom_holds(cluster, counts, item, node, a))
                });
                if !ok {
                    weight += rule.weight;
                    n += 1;
                }
            }
        }
        (weight, n)
    }
}
