//! Mutations of a JSON value at a node chosen by index: the node replaced, removed from its
//! parent, or given a new field or element.

use serde_json::Value;

/// What one mutation does at its node.
#[derive(Debug, Clone, Copy)]
pub enum Mutation {
    Replace,
    Remove,
    Add,
}

/// Applies `mutation` at the node `at` picks (any node, the root included), with `key` and `value` as the
/// new field or value.
pub fn mutate(root: &mut Value, at: usize, mutation: Mutation, key: &str, value: Value) {
    let mut pointers = Vec::new();
    collect(root, String::new(), &mut pointers);
    let Some(pointer) = pointers.get(at % pointers.len().max(1)).cloned() else { return };
    match mutation {
        Mutation::Replace => {
            if let Some(node) = root.pointer_mut(&pointer) {
                *node = value;
            }
        }
        Mutation::Remove => {
            let Some((parent, last)) = pointer.rsplit_once('/') else { return };
            let last = last.replace("~1", "/").replace("~0", "~");
            match root.pointer_mut(parent) {
                Some(Value::Object(object)) => {
                    object.remove(&last);
                }
                Some(Value::Array(array)) => {
                    if let Ok(i) = last.parse::<usize>()
                        && i < array.len()
                    {
                        array.remove(i);
                    }
                }
                _ => {}
            }
        }
        Mutation::Add => match root.pointer_mut(&pointer) {
            Some(Value::Object(object)) => {
                object.insert(key.to_owned(), value);
            }
            Some(Value::Array(array)) => array.push(value),
            Some(node) => *node = value,
            None => {}
        },
    }
}

fn collect(value: &Value, pointer: String, out: &mut Vec<String>) {
    match value {
        Value::Object(object) => {
            for (key, child) in object {
                collect(child, format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1")), out);
            }
        }
        Value::Array(array) => {
            for (i, child) in array.iter().enumerate() {
                collect(child, format!("{pointer}/{i}"), out);
            }
        }
        _ => {}
    }
    out.push(pointer);
}
