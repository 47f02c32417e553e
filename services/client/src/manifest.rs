//! An agent's `AGENT.md`: YAML front matter between `---` lines, then Markdown.
//! Holdpoint reads `name`, `description` and `loop.connections` (`request_connection`
//! is off unless `loop.connections: true`).

use std::path::Path;

use serde::Deserialize;

use crate::ClientError;

/// The parts of an agent manifest Holdpoint reads. Unknown keys are ignored: the
/// manifest belongs to the harness, not to Holdpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct AgentManifest {
    /// The agent's name.
    #[serde(default)]
    pub name: Option<String>,
    /// What it does.
    #[serde(default)]
    pub description: Option<String>,
    /// The `loop:` settings (`loop.connections` turns `request_connection` on).
    #[serde(default, rename = "loop")]
    pub loop_settings: LoopSettings,
}

/// The `loop:` block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct LoopSettings {
    /// `connections: true` turns `request_connection` on. Off by default.
    #[serde(default)]
    pub connections: bool,
}

impl AgentManifest {
    /// Parses the front matter of an `AGENT.md` text. A text without front matter is a
    /// manifest with every default (connections off).
    ///
    /// # Errors
    /// [`ClientError::Manifest`] when the front matter is not closed or not valid YAML
    /// of this shape (e.g. `connections: "yes"`).
    pub fn from_markdown(text: &str) -> Result<Self, ClientError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut lines = text.lines();
        if lines.next().map(str::trim_end) != Some("---") {
            return Ok(AgentManifest::default());
        }
        let mut yaml = String::new();
        for line in lines {
            if line.trim_end() == "---" {
                if yaml.trim().is_empty() {
                    return Ok(AgentManifest::default());
                }
                return serde_yaml_ng::from_str(&yaml)
                    .map_err(|e| ClientError::Manifest(e.to_string()));
            }
            yaml.push_str(line);
            yaml.push('\n');
        }
        Err(ClientError::Manifest(
            "front matter is not closed with ---".into(),
        ))
    }

    /// Reads and parses an `AGENT.md` file.
    ///
    /// # Errors
    /// [`ClientError::Manifest`] when unreadable or invalid.
    pub fn from_path(path: &Path) -> Result<Self, ClientError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ClientError::Manifest(format!("{}: {e}", path.display())))?;
        Self::from_markdown(&text)
    }

    /// True when `request_connection` is on.
    pub fn connections_enabled(&self) -> bool {
        self.loop_settings.connections
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_example_turns_connections_on() {
        let m = AgentManifest::from_markdown(
            "---\nname: coder\ndescription: Writes and ships changes to the team's repositories.\nloop:\n  connections: true\n---\n\n# Coder\n",
        )
        .expect("valid");
        assert_eq!(m.name.as_deref(), Some("coder"));
        assert!(m.connections_enabled());
    }

    #[test]
    fn connections_are_off_by_default() {
        for text in [
            "# no front matter",
            "---\nname: x\n---\n",
            "---\nloop:\n  connections: false\n---\n",
            "---\nloop: {}\n---\n",
            "---\n---\n",
        ] {
            let m = AgentManifest::from_markdown(text).expect("valid");
            assert!(!m.connections_enabled(), "{text}");
        }
    }

    #[test]
    fn bad_front_matter_is_an_error() {
        assert!(AgentManifest::from_markdown("---\nloop:\n  connections: \"yes\"\n---\n").is_err());
        assert!(AgentManifest::from_markdown("---\nname: x\n").is_err());
    }
}
