//! MLC-LLM's conversation template (`conv_template` of `mlc-chat-config.json`, MLC's
//! `protocol/conversation_protocol.py`): how chat messages become one prompt.
//!
//! The prompt is the system template (its `{system_message}` replaced), then per message its
//! role, `role_content_sep`, the role's template with `{user_message}` / `{assistant_message}` /
//! `{tool_message}` replaced, and a separator (`seps[0]` after user and tool messages,
//! `seps[1]`, or `seps[0]` when there is one, after assistant ones); the assistant's turn to
//! speak is its role and `role_empty_sep`. `system_prefix_token_ids` go before the tokens.

use serde::Deserialize;
use std::collections::BTreeMap;

/// A chat message.
#[derive(Clone, Debug)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Its text.
    pub content: String,
}

/// The template.
#[derive(Clone, Debug, Deserialize)]
pub struct Conversation {
    /// Its name.
    #[serde(default)]
    pub name: Option<String>,
    /// The system prompt's template (`{system_message}` is replaced).
    #[serde(default = "system_placeholder")]
    pub system_template: String,
    /// The default system message.
    #[serde(default)]
    pub system_message: String,
    /// Tokens put before the prompt's (BOS).
    #[serde(default)]
    pub system_prefix_token_ids: Option<Vec<u32>>,
    /// Whether the first message after a system message gets its role prefix.
    #[serde(default = "yes")]
    pub add_role_after_system_message: bool,
    /// The role names as they appear in the prompt.
    pub roles: BTreeMap<String, String>,
    /// Per-role templates (their `{..._message}` placeholder replaced by the content).
    #[serde(default)]
    pub role_templates: BTreeMap<String, String>,
    /// Separators after messages: one, or one after user and one after assistant messages.
    pub seps: Vec<String>,
    /// Between a role and its content.
    #[serde(default)]
    pub role_content_sep: String,
    /// After a role with no content (the assistant's turn).
    #[serde(default)]
    pub role_empty_sep: String,
    /// Strings that end generation.
    #[serde(default)]
    pub stop_str: Vec<String>,
    /// Tokens that end generation.
    #[serde(default)]
    pub stop_token_ids: Vec<u32>,
}

fn system_placeholder() -> String {
    "{system_message}".into()
}

fn yes() -> bool {
    true
}

fn placeholder(role: &str) -> String {
    format!("{{{role}_message}}")
}

impl Conversation {
    /// Checks the template's shape (what MLC's validator checks).
    pub fn check(&self) -> Result<(), String> {
        if self.seps.is_empty() || self.seps.len() > 2 {
            return Err(format!("seps must have 1 or 2 entries, has {}", self.seps.len()));
        }
        for r in ["user", "assistant"] {
            if !self.roles.contains_key(r) {
                return Err(format!("roles has no \"{r}\""));
            }
        }
        Ok(())
    }

    fn template(&self, role: &str) -> String {
        self.role_templates.get(role).cloned().unwrap_or_else(|| placeholder(role))
    }

    /// The prompt of `messages` followed by the assistant's turn. A leading system message
    /// replaces the template's. Unknown roles are errors.
    pub fn prompt(&self, messages: &[Message]) -> Result<String, String> {
        let (system, rest) = match messages.first() {
            Some(m) if m.role == "system" => (m.content.as_str(), &messages[1..]),
            _ => (self.system_message.as_str(), messages),
        };
        let system_msg = self.system_template.replace("{system_message}", system);
        let sep_user = &self.seps[0];
        let sep_assistant = self.seps.get(1).unwrap_or(&self.seps[0]);
        let mut out = String::new();
        out.push_str(&system_msg);
        for (i, m) in rest.iter().enumerate() {
            let role = self
                .roles
                .get(&m.role)
                .ok_or_else(|| format!("role \"{}\" is not one of the template's ({:?})", m.role, self.roles.keys()))?;
            if m.role == "system" {
                return Err("a system message must come first".into());
            }
            let sep = if m.role == "assistant" { sep_assistant } else { sep_user };
            if !(i == 0 && !self.add_role_after_system_message && !system_msg.is_empty()) {
                out.push_str(role);
                out.push_str(&self.role_content_sep);
            }
            out.push_str(&self.template(&m.role).replace(&placeholder(&m.role), &m.content));
            out.push_str(sep);
        }
        out.push_str(&self.roles["assistant"]);
        out.push_str(&self.role_empty_sep);
        Ok(out.replace("{function_string}", ""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llama3() -> Conversation {
        serde_json::from_value(serde_json::json!({
            "name": "llama-3",
            "system_template": "<|start_header_id|>system<|end_header_id|>\n\n{system_message}<|eot_id|>",
            "system_message": "You are a helpful assistant.",
            "roles": {"user": "<|start_header_id|>user", "assistant": "<|start_header_id|>assistant"},
            "seps": ["<|eot_id|>"],
            "role_content_sep": "<|end_header_id|>\n\n",
            "role_empty_sep": "<|end_header_id|>\n\n",
            "stop_token_ids": [128001, 128009],
            "system_prefix_token_ids": [128000]
        }))
        .unwrap()
    }

    #[test]
    fn llama3_prompt() {
        let c = llama3();
        c.check().unwrap();
        let p = c.prompt(&[Message { role: "user".into(), content: "Hi".into() }]).unwrap();
        assert_eq!(
            p,
            "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>\
             <|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
        );
        let p = c
            .prompt(&[
                Message { role: "system".into(), content: "Be brief.".into() },
                Message { role: "user".into(), content: "Hi".into() },
                Message { role: "assistant".into(), content: "Hello".into() },
                Message { role: "user".into(), content: "Bye".into() },
            ])
            .unwrap();
        assert!(p.starts_with("<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"));
        assert!(p.contains("assistant<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>user"));
        assert!(c.prompt(&[Message { role: "robot".into(), content: "x".into() }]).is_err());
    }

    #[test]
    fn inst_style_template() {
        let c: Conversation = serde_json::from_value(serde_json::json!({
            "system_template": "[INST] <<SYS>>\n{system_message}\n<</SYS>>\n\n",
            "system_message": "S",
            "roles": {"user": "[INST]", "assistant": "[/INST]"},
            "seps": [" ", " </s>"],
            "role_content_sep": " ",
            "role_empty_sep": " ",
            "add_role_after_system_message": false
        }))
        .unwrap();
        let p = c.prompt(&[Message { role: "user".into(), content: "Q".into() }]).unwrap();
        assert_eq!(p, "[INST] <<SYS>>\nS\n<</SYS>>\n\nQ [/INST] ");
    }
}
