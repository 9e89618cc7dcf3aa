//! The lexer: tokens on demand, in the mode the parser is in (top level or thread code).

use super::*;

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok {
    Ident(String),
    Int(i64),
    Str(String),
    Punct(&'static str),
    Eof,
}

#[derive(Clone, Debug)]
pub(super) struct Token {
    pub(super) tok: Tok,
    pub(super) pos: Pos,
}

impl Token {
    pub(super) fn describe(&self) -> String {
        match &self.tok {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Int(n) => format!("`{n}`"),
            Tok::Str(_) => "a string".into(),
            Tok::Punct(p) => format!("`{p}`"),
            Tok::Eof => "end of file".into(),
        }
    }
    pub(super) fn is(&self, p: &str) -> bool {
        matches!(self.tok, Tok::Punct(q) if q == p)
    }
    pub(super) fn ident(&self) -> Option<&str> {
        match &self.tok {
            Tok::Ident(s) => Some(s),
            _ => None,
        }
    }
}

/// Where the lexer is: at top level OCaml comments `(* *)` are recognised; in C code they
/// are not, so that `READ_ONCE(*x)` lexes as C.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Mode {
    Top,
    Code,
}

/// Longest first, so that `/\` wins over `/`.
pub(super) const PUNCTS: &[&str] = &[
    "<<=", ">>=", "/\\", "\\/", "/=", "%=", "=>", "==", "!=", "<=", ">=", "&&", "||", "++", "--",
    "->", "<<", ">>", "+=", "-=", "*=", "|=", "&=", "^=", "(", ")", "{", "}", "[", "]", ";", ",",
    "*", "&", "+", "-", "|", "^", "~", "!", "=", "<", ">", ":", ".", "?", "%", "/",
];

#[derive(Clone)]
pub(super) struct Cursor<'a> {
    pub(super) src: &'a str,
    pub(super) at: usize,
    pub(super) line: u32,
    pub(super) col: u32,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(src: &'a str) -> Self {
        Cursor {
            src,
            at: 0,
            line: 1,
            col: 1,
        }
    }
    pub(super) fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            col: self.col,
        }
    }
    pub(super) fn rest(&self) -> &'a str {
        &self.src[self.at..]
    }
    pub(super) fn peek_char(&self) -> Option<char> {
        self.rest().chars().next()
    }
    pub(super) fn bump_char(&mut self) -> Option<char> {
        let c = self.peek_char()?;
        self.at += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }
    pub(super) fn skip(&mut self, n: usize) {
        for _ in 0..n {
            self.bump_char();
        }
    }

    pub(super) fn skip_trivia(&mut self, mode: Mode) -> Result<()> {
        loop {
            let rest = self.rest();
            if rest.starts_with(|c: char| c.is_whitespace()) {
                self.bump_char();
            } else if rest.starts_with("//") {
                while !matches!(self.peek_char(), None | Some('\n')) {
                    self.bump_char();
                }
            } else if rest.starts_with("/*") {
                let start = self.pos();
                self.skip(2);
                loop {
                    if self.rest().starts_with("*/") {
                        self.skip(2);
                        break;
                    }
                    if self.bump_char().is_none() {
                        return err(start, ErrorKind::Unterminated("comment `/*`"));
                    }
                }
            } else if mode == Mode::Top && rest.starts_with("(*") {
                // OCaml comments nest.
                let start = self.pos();
                self.skip(2);
                let mut depth = 1;
                while depth > 0 {
                    if self.rest().starts_with("(*") {
                        self.skip(2);
                        depth += 1;
                    } else if self.rest().starts_with("*)") {
                        self.skip(2);
                        depth -= 1;
                    } else if self.bump_char().is_none() {
                        return err(start, ErrorKind::Unterminated("comment `(*`"));
                    }
                }
            } else {
                return Ok(());
            }
        }
    }

    pub(super) fn lex(&mut self, mode: Mode) -> Result<Token> {
        self.skip_trivia(mode)?;
        let pos = self.pos();
        let Some(c) = self.peek_char() else {
            return Ok(Token { tok: Tok::Eof, pos });
        };
        let tok = if c.is_ascii_alphabetic() || c == '_' {
            let start = self.at;
            while matches!(self.peek_char(), Some(c) if c.is_ascii_alphanumeric() || c == '_') {
                self.bump_char();
            }
            Tok::Ident(self.src[start..self.at].to_string())
        } else if c.is_ascii_digit() {
            let start = self.at;
            let hex = self.rest().starts_with("0x") || self.rest().starts_with("0X");
            if hex {
                self.skip(2);
            }
            while matches!(self.peek_char(), Some(c) if c.is_ascii_alphanumeric() || c == '_') {
                self.bump_char();
            }
            let text = &self.src[start..self.at];
            let v = if hex {
                i64::from_str_radix(&text[2..], 16)
            } else {
                text.parse::<i64>()
            };
            match v {
                Ok(v) => Tok::Int(v),
                Err(_) => return err(pos, ErrorKind::BadInt(format!("`{text}`"))),
            }
        } else if c == '"' {
            self.bump_char();
            let start = self.at;
            loop {
                match self.peek_char() {
                    Some('"') => break,
                    Some(_) => {
                        self.bump_char();
                    }
                    None => return err(pos, ErrorKind::Unterminated("string")),
                }
            }
            let s = self.src[start..self.at].to_string();
            self.bump_char();
            Tok::Str(s)
        } else if let Some(p) = PUNCTS.iter().find(|p| self.rest().starts_with(**p)) {
            self.skip(p.chars().count());
            Tok::Punct(p)
        } else {
            return err(pos, ErrorKind::BadChar(c));
        };
        Ok(Token { tok, pos })
    }

    /// The test name after `C`: everything up to the next white space (`2+2W`, `SB+mb.x`).
    pub(super) fn test_name(&mut self) -> Result<String> {
        while matches!(self.peek_char(), Some(' ' | '\t')) {
            self.bump_char();
        }
        let start = self.at;
        while matches!(self.peek_char(), Some(c) if !c.is_whitespace()) {
            self.bump_char();
        }
        if self.at == start {
            let found = match self.peek_char() {
                None => "end of file",
                Some(_) => "end of line",
            };
            return err(
                self.pos(),
                ErrorKind::Expected {
                    expected: "the test name after `C`".into(),
                    found: found.into(),
                },
            );
        }
        Ok(self.src[start..self.at].to_string())
    }

    /// Skips to the end of the current line (herd7's `Key=value` information lines).
    pub(super) fn skip_line(&mut self) {
        while !matches!(self.bump_char(), None | Some('\n')) {}
    }
}
