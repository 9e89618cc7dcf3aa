//! The entities lump: text blocks `{ "key" "value" ... }`.

/// Where the entity text is not what it should be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("entities lump, byte {offset}: {message}")]
pub struct EntitiesError {
    pub offset: usize,
    pub message: String,
}

/// One entity: its key/value pairs in file order (keys may repeat; the first wins in
/// [`Entity::get`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entity {
    pub pairs: Vec<(String, String)>,
}

impl Entity {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

fn error(offset: usize, message: &str) -> EntitiesError {
    EntitiesError {
        offset,
        message: message.to_string(),
    }
}

/// Parses entity text. Whitespace separates tokens, `//` starts a comment to the end of the
/// line, keys and values are double-quoted (no escapes, as in Quake 3).
pub fn parse_entities(text: &str) -> Result<Vec<Entity>, EntitiesError> {
    let bytes = text.as_bytes();
    let mut at = 0;
    let mut out = Vec::new();
    let mut current: Option<Entity> = None;
    let mut key: Option<String> = None;
    loop {
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        if bytes[at..].starts_with(b"//") {
            while at < bytes.len() && bytes[at] != b'\n' {
                at += 1;
            }
            continue;
        }
        let Some(&c) = bytes.get(at) else { break };
        match (c, current.is_some()) {
            (b'{', false) => {
                current = Some(Entity::default());
                at += 1;
            }
            (b'{', true) => return Err(error(at, "`{` inside an entity")),
            (b'}', true) if key.is_none() => {
                out.extend(current.take());
                at += 1;
            }
            (b'}', true) => return Err(error(at, "key without a value")),
            (b'"', true) => {
                let start = at + 1;
                let Some(len) = bytes[start..].iter().position(|&b| b == b'"') else {
                    return Err(error(at, "unterminated string"));
                };
                // Quotes are ASCII, so both ends are character boundaries.
                let s = text[start..start + len].to_string();
                at = start + len + 1;
                match key.take() {
                    None => key = Some(s),
                    Some(k) => {
                        if let Some(e) = current.as_mut() {
                            e.pairs.push((k, s));
                        }
                    }
                }
            }
            _ => return Err(error(at, "unexpected character")),
        }
    }
    if current.is_some() {
        return Err(error(at, "entity not closed by `}`"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_blocks_and_comments() {
        let text = "{\n\"classname\" \"worldspawn\"\n}\n// comment { \n{ \"classname\" \"info_player_deathmatch\" \"origin\" \"1 2 3\" }";
        let e = parse_entities(text).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].get("classname"), Some("worldspawn"));
        assert_eq!(e[1].get("origin"), Some("1 2 3"));
        assert_eq!(e[1].get("angle"), None);
        assert_eq!(parse_entities("").unwrap(), vec![]);
    }

    #[test]
    fn refuses_malformed_text() {
        for bad in [
            "{",
            "{ \"a\" }",
            "{ \"a",
            "{ {",
            "x",
            "{ \"a\" \"b\" } }",
            "{ \"a\" \"b\" x }",
        ] {
            assert!(parse_entities(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
