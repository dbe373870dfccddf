//! The modes a runtime knows by name ([`Modes`]): the built-in ones, and an application's own.
//! The server, the CLI and the library read a mode and its parameters here, and only here.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::{GotOptions, Mode, Reasoning, TotOptions};

/// A mode a [`Modes`] list reads by name: its name, its parameters, and how to read them.
#[derive(Clone, Copy)]
pub struct ModeKind {
    name: &'static str,
    /// The names of its parameters (camelCase, as in JSON).
    parameters: fn() -> Vec<String>,
    /// Its parameters' JSON Schema (an object's).
    schema: fn() -> Value,
    read: fn(&Map<String, Value>) -> Result<Mode, String>,
}

impl std::fmt::Debug for ModeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModeKind").field("name", &self.name).finish_non_exhaustive()
    }
}

impl ModeKind {
    /// A mode of the application's own, named [`Reasoning::name`]: its parameters are `R`'s
    /// fields (read with serde, missing ones from `R::default()`), and it runs as
    /// [`Mode::Custom`].
    pub fn custom<R>() -> Self
    where
        R: Reasoning + Serialize + DeserializeOwned + Default + JsonSchema,
    {
        Self {
            name: R::default().name(),
            parameters: parameter_names::<R>,
            schema: parameters_schema::<R>,
            read: |map| read_parameters::<R>(map).map(Mode::custom),
        }
    }

    /// The mode's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The names of its parameters (camelCase, as in JSON).
    pub fn parameters(&self) -> Vec<String> {
        (self.parameters)()
    }
}

/// The names of `R`'s parameters: the members of its default, as JSON.
fn parameter_names<R: Serialize + Default>() -> Vec<String> {
    match serde_json::to_value(R::default()) {
        Ok(Value::Object(map)) => map.into_iter().map(|(k, _)| k).collect(),
        _ => Vec::new(),
    }
}

/// `R`'s JSON Schema, its subschemas inline (an OpenAPI document can hold it as it is).
fn parameters_schema<R: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| settings.inline_subschemas = true)
        .into_generator();
    let mut schema = serde_json::to_value(generator.into_root_schema_for::<R>())
        .unwrap_or_else(|_| Value::Object(Map::new()));
    if let Some(map) = schema.as_object_mut() {
        map.remove("$schema");
        map.remove("title");
    }
    schema
}

/// `R` read from `map` (its `type`, the mode's name, left out).
fn read_parameters<R: DeserializeOwned>(map: &Map<String, Value>) -> Result<R, String> {
    let mut map = map.clone();
    map.remove("type");
    R::deserialize(&Value::Object(map)).map_err(|e| e.to_string())
}

/// The modes a runtime knows, by name: react, tot and got ([`Modes::builtin`]), and those
/// added with [`Modes::with`].
#[derive(Debug, Clone)]
pub struct Modes {
    kinds: Vec<ModeKind>,
}

impl Default for Modes {
    fn default() -> Self {
        Self::builtin()
    }
}

/// Why a mode could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModeError {
    /// No known mode has this name.
    #[error("unknown mode {name:?}: expected {}", alternatives(.known))]
    Unknown {
        /// The name given.
        name: String,
        /// The modes known.
        known: Vec<&'static str>,
    },
    /// A parameter no known mode has.
    #[error("unknown parameter {name:?}; the modes' parameters are {}", .known.join(", "))]
    UnknownParameter {
        /// The name given.
        name: String,
        /// The parameters known.
        known: Vec<String>,
    },
    /// The mode's parameters could not be read.
    #[error("{0}")]
    Invalid(String),
    /// The value is neither a name nor an object with a `type`.
    #[error("a mode is a name or an object with a \"type\"")]
    NotAMode,
}

/// `a, b or c`.
fn alternatives(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_string(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

impl Modes {
    /// react, tot and got.
    pub fn builtin() -> Self {
        let react = ModeKind {
            name: "react",
            parameters: Vec::new,
            schema: parameters_schema::<super::React>,
            read: |_| Ok(Mode::React),
        };
        let tot = ModeKind {
            name: "tot",
            parameters: parameter_names::<TotOptions>,
            schema: parameters_schema::<TotOptions>,
            read: |map| read_parameters(map).map(Mode::Tot),
        };
        let got = ModeKind {
            name: "got",
            parameters: parameter_names::<GotOptions>,
            schema: parameters_schema::<GotOptions>,
            read: |map| read_parameters(map).map(Mode::Got),
        };
        Self { kinds: vec![react, tot, got] }
    }

    /// These modes and `kind` (which replaces a mode of the same name).
    pub fn with(mut self, kind: ModeKind) -> Self {
        self.kinds.retain(|k| k.name != kind.name);
        self.kinds.push(kind);
        self
    }

    /// The modes' names.
    pub fn names(&self) -> Vec<&'static str> {
        self.kinds.iter().map(|k| k.name).collect()
    }

    /// Every parameter some mode has (camelCase), sorted, once each.
    pub fn parameters(&self) -> Vec<String> {
        let mut all: Vec<String> = self.kinds.iter().flat_map(ModeKind::parameters).collect();
        all.sort();
        all.dedup();
        all
    }

    /// The JSON Schema of a mode's parameters, whichever mode: an object whose properties are
    /// every mode's parameters, each described with the modes that have it (`tot, got: …`),
    /// and no other property (what [`parse`](Self::parse) accepts).
    pub fn parameters_schema(&self) -> Value {
        let mut properties = Map::new();
        let mut owners: Vec<(String, Vec<&str>)> = Vec::new();
        for kind in &self.kinds {
            let schema = (kind.schema)();
            let Some(Value::Object(props)) = schema.get("properties") else { continue };
            for (name, property) in props {
                match owners.iter_mut().find(|(n, _)| n == name) {
                    Some((_, modes)) => modes.push(kind.name),
                    None => {
                        owners.push((name.clone(), vec![kind.name]));
                        properties.insert(name.clone(), property.clone());
                    }
                }
            }
        }
        for (name, modes) in owners {
            if let Some(Value::Object(property)) = properties.get_mut(&name) {
                let said = property.get("description").and_then(Value::as_str).unwrap_or("");
                let description = format!("{}: {said}", modes.join(", "));
                property.insert("description".into(), description.trim_end().into());
            }
        }
        serde_json::json!({
            "type": "object",
            "description": format!(
                "The parameters of the chosen mode ({}); each is optional, with its default. \
                 Those of another mode are ignored; one no mode has is refused.",
                self.names().join(", ")
            ),
            "properties": properties,
            "additionalProperties": false,
        })
    }

    /// The mode named `name` with `parameters` (camelCase; missing ones take their defaults).
    /// A parameter that no known mode has is refused; one of another mode is ignored.
    pub fn parse(&self, name: &str, parameters: &Map<String, Value>) -> Result<Mode, ModeError> {
        let kind = self
            .kinds
            .iter()
            .find(|k| k.name == name)
            .ok_or_else(|| ModeError::Unknown { name: name.to_string(), known: self.names() })?;
        let known = self.parameters();
        if let Some(unknown) =
            parameters.keys().find(|k| *k != "type" && !known.iter().any(|p| p == *k))
        {
            return Err(ModeError::UnknownParameter { name: unknown.clone(), known });
        }
        (kind.read)(parameters).map_err(ModeError::Invalid)
    }

    /// A mode as JSON: its name, or an object with `type` (default react) and its parameters.
    pub fn parse_value(&self, value: &Value) -> Result<Mode, ModeError> {
        match value {
            Value::String(name) => self.parse(name, &Map::new()),
            Value::Object(map) => {
                let name = map.get("type").and_then(Value::as_str).unwrap_or("react");
                let kind = self.kinds.iter().find(|k| k.name == name).ok_or_else(|| {
                    ModeError::Unknown { name: name.to_string(), known: self.names() }
                })?;
                (kind.read)(map).map_err(ModeError::Invalid)
            }
            _ => Err(ModeError::NotAMode),
        }
    }

    /// The mode a session's `options` name ([`super::OPTION_MODE`]); react when none, or one
    /// these modes cannot read.
    pub fn of_options(&self, options: &Value) -> Mode {
        options.get(super::OPTION_MODE).and_then(|m| self.parse_value(m).ok()).unwrap_or_default()
    }
}
