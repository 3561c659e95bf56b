//! JSON-RPC 2.0 as MCP's stdio transport carries it: a line is a request, a notification, or (in
//! the 2025-03-26 revision) a batch of them; a line that is none is answered with the error the
//! specification gives it.

use serde_json::{Value, json};

/// A message from the client.
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// Not JSON, or not a request: answered with `error` (`id` null when it could not be read).
    Bad {
        id: Value,
        error: RpcError,
    },
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub fn parse_error(why: impl std::fmt::Display) -> Self {
        RpcError { code: -32700, message: format!("not JSON: {why}") }
    }

    pub fn invalid_request(why: &str) -> Self {
        RpcError { code: -32600, message: format!("not a JSON-RPC 2.0 request: {why}") }
    }

    pub fn method_not_found(method: &str) -> Self {
        RpcError {
            code: -32601,
            message: format!("no method `{method}` (this server offers initialize, ping, tools/list and tools/call)"),
        }
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        RpcError { code: -32602, message: message.into() }
    }

    /// The answer to a request the client cancelled before it ran.
    pub fn request_cancelled() -> Self {
        RpcError { code: -32800, message: "the request was cancelled".into() }
    }
}

/// The messages of one line.
pub fn parse(line: &str) -> Vec<Incoming> {
    match serde_json::from_str::<Value>(line) {
        Err(e) => vec![Incoming::Bad { id: Value::Null, error: RpcError::parse_error(e) }],
        Ok(Value::Array(batch)) if batch.is_empty() => {
            vec![Incoming::Bad { id: Value::Null, error: RpcError::invalid_request("an empty batch") }]
        }
        Ok(Value::Array(batch)) => batch.into_iter().map(message).collect(),
        Ok(one) => vec![message(one)],
    }
}

fn message(value: Value) -> Incoming {
    let id = value.get("id").cloned();
    // An id that is not a string or a number cannot be answered to: null, as for an unread one.
    let answerable = id.clone().filter(|id| id.is_string() || id.is_number()).unwrap_or(Value::Null);
    let bad = |why: &str| Incoming::Bad { id: answerable.clone(), error: RpcError::invalid_request(why) };
    if value.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return bad("`jsonrpc` must be \"2.0\"");
    }
    let Some(method) = value.get("method").and_then(Value::as_str) else {
        // An answer to a request of ours: this server sends none, so there is nothing to match.
        return if value.get("result").is_some() || value.get("error").is_some() {
            Incoming::Notification { method: String::new(), params: Value::Null }
        } else {
            bad("no `method`")
        };
    };
    let params = value.get("params").cloned().unwrap_or_else(|| json!({}));
    if !(params.is_object() || params.is_array()) {
        return bad("`params` must be an object");
    }
    match id {
        None => Incoming::Notification { method: method.to_string(), params },
        Some(id @ (Value::String(_) | Value::Number(_))) => {
            Incoming::Request { id, method: method.to_string(), params }
        }
        Some(_) => bad("`id` must be a string or a number"),
    }
}

/// A response to request `id`.
pub fn response(id: &Value, result: Result<Value, RpcError>) -> Value {
    match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => json!({"jsonrpc": "2.0", "id": id, "error": {"code": e.code, "message": e.message}}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_requests_notifications_or_the_errors_the_specification_names() {
        let kinds: Vec<String> = [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":"a","method":"x","params":3}"#,
            r#"{"id":2,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
            "not json",
            "[]",
        ]
        .iter()
        .flat_map(|line| parse(line))
        .map(|m| match m {
            Incoming::Request { id, method, .. } => format!("request {id} {method}"),
            Incoming::Notification { method, .. } => format!("notification {method}"),
            Incoming::Bad { id, error } => format!("bad {id} {}", error.code),
        })
        .collect();
        assert_eq!(
            kinds,
            [
                "request 1 ping",
                "notification notifications/initialized",
                "bad \"a\" -32600",
                "bad 2 -32600",
                "bad null -32600",
                "bad null -32700",
                "bad null -32600"
            ]
        );
        let batch =
            parse(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]"#);
        assert_eq!(batch.len(), 2);
    }
}
