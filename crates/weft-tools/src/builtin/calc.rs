//! `calculator`: arithmetic by a real expression parser (recursive descent over a token
//! list); nothing is ever evaluated as code. Anything outside the grammar is a parse error.
//!
//! ```text
//! expr    = term (("+" | "-") term)*
//! term    = unary (("*" | "/" | "%") unary)*
//! unary   = ("-" | "+") unary | power
//! power   = primary ("^" unary)?            (right-associative)
//! primary = number | constant | function "(" expr ("," expr)* ")" | "(" expr ")"
//! ```
//!
//! Constants: `pi`, `e`. Functions: `sqrt abs sin cos tan ln log10 exp floor ceil round`
//! (one argument), `min max` (one or more).

/// Longest expression accepted.
const MAX_LEN: usize = 1000;
/// Deepest nesting accepted (parentheses, unary signs, powers).
const MAX_DEPTH: usize = 64;

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Num(f64),
    Ident(String),
    Op(char),
}

/// Evaluates `input`; `Err` says what is wrong and where.
pub fn evaluate(input: &str) -> Result<f64, String> {
    if input.len() > MAX_LEN {
        return Err(format!("the expression is longer than {MAX_LEN} characters"));
    }
    let tokens = tokenize(input)?;
    let mut parser = Parser { tokens, pos: 0, depth: 0 };
    let value = parser.expr()?;
    if let Some((token, _)) = parser.tokens.get(parser.pos) {
        return Err(format!("unexpected {} after a complete expression", describe(token)));
    }
    if !value.is_finite() {
        return Err("the result is not a finite number (division by zero or overflow)".into());
    }
    Ok(value)
}

fn describe(token: &Token) -> String {
    match token {
        Token::Num(n) => format!("number {n}"),
        Token::Ident(name) => format!("name {name:?}"),
        Token::Op(c) => format!("{c:?}"),
    }
}

fn tokenize(input: &str) -> Result<Vec<(Token, usize)>, String> {
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = input.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            let start = i;
            while i < chars.len() && (chars[i].1.is_ascii_digit() || chars[i].1 == '.') {
                i += 1;
            }
            // An exponent: 1e3, 2.5E-4.
            if i < chars.len() && matches!(chars[i].1, 'e' | 'E') {
                let mut j = i + 1;
                if j < chars.len() && matches!(chars[j].1, '+' | '-') {
                    j += 1;
                }
                if j < chars.len() && chars[j].1.is_ascii_digit() {
                    i = j;
                    while i < chars.len() && chars[i].1.is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let end = chars.get(i).map_or(input.len(), |(at, _)| *at);
            let text = &input[chars[start].0..end];
            let value: f64 =
                text.parse().map_err(|_| format!("invalid number {text:?} at position {at}"))?;
            out.push((Token::Num(value), at));
        } else if c.is_ascii_alphabetic() {
            let start = i;
            while i < chars.len() && (chars[i].1.is_ascii_alphanumeric() || chars[i].1 == '_') {
                i += 1;
            }
            let end = chars.get(i).map_or(input.len(), |(at, _)| *at);
            out.push((Token::Ident(input[chars[start].0..end].to_ascii_lowercase()), at));
        } else if "+-*/%^(),".contains(c) {
            out.push((Token::Op(c), at));
            i += 1;
        } else {
            return Err(format!("unexpected character {c:?} at position {at}"));
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<(Token, usize)>,
    pos: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos).map(|(t, _)| t)
    }

    fn eat(&mut self, op: char) -> bool {
        if self.peek() == Some(&Token::Op(op)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn deeper(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("the expression nests deeper than {MAX_DEPTH} levels"));
        }
        Ok(())
    }

    fn expr(&mut self) -> Result<f64, String> {
        let mut value = self.term()?;
        loop {
            if self.eat('+') {
                value += self.term()?;
            } else if self.eat('-') {
                value -= self.term()?;
            } else {
                return Ok(value);
            }
        }
    }

    fn term(&mut self) -> Result<f64, String> {
        let mut value = self.unary()?;
        loop {
            if self.eat('*') {
                value *= self.unary()?;
            } else if self.eat('/') {
                value /= self.unary()?;
            } else if self.eat('%') {
                value %= self.unary()?;
            } else {
                return Ok(value);
            }
        }
    }

    fn unary(&mut self) -> Result<f64, String> {
        self.deeper()?;
        let value = if self.eat('-') {
            -self.unary()?
        } else if self.eat('+') {
            self.unary()?
        } else {
            self.power()?
        };
        self.depth -= 1;
        Ok(value)
    }

    fn power(&mut self) -> Result<f64, String> {
        let base = self.primary()?;
        if self.eat('^') { Ok(base.powf(self.unary()?)) } else { Ok(base) }
    }

    fn primary(&mut self) -> Result<f64, String> {
        let Some((token, at)) = self.tokens.get(self.pos).cloned() else {
            return Err("the expression ends too early".into());
        };
        self.pos += 1;
        match token {
            Token::Num(n) => Ok(n),
            Token::Op('(') => {
                self.deeper()?;
                let value = self.expr()?;
                self.depth -= 1;
                if !self.eat(')') {
                    return Err(format!("missing ')' for the '(' at position {at}"));
                }
                Ok(value)
            }
            Token::Ident(name) => match name.as_str() {
                "pi" => Ok(std::f64::consts::PI),
                "e" => Ok(std::f64::consts::E),
                _ => self.call(&name, at),
            },
            Token::Op(c) => Err(format!("unexpected {c:?} at position {at}")),
        }
    }

    fn call(&mut self, name: &str, at: usize) -> Result<f64, String> {
        let one: Option<fn(f64) -> f64> = match name {
            "sqrt" => Some(f64::sqrt),
            "abs" => Some(f64::abs),
            "sin" => Some(f64::sin),
            "cos" => Some(f64::cos),
            "tan" => Some(f64::tan),
            "ln" => Some(f64::ln),
            "log10" => Some(f64::log10),
            "exp" => Some(f64::exp),
            "floor" => Some(f64::floor),
            "ceil" => Some(f64::ceil),
            "round" => Some(f64::round),
            "min" | "max" => None,
            _ => return Err(format!("unknown name {name:?} at position {at}")),
        };
        if !self.eat('(') {
            return Err(format!("{name} at position {at} must be followed by '('"));
        }
        self.deeper()?;
        let mut args = vec![self.expr()?];
        while self.eat(',') {
            args.push(self.expr()?);
        }
        self.depth -= 1;
        if !self.eat(')') {
            return Err(format!("missing ')' after the arguments of {name}"));
        }
        match (one, args.as_slice()) {
            (Some(f), [x]) => Ok(f(*x)),
            (Some(_), _) => Err(format!("{name} takes one argument, not {}", args.len())),
            (None, _) if name == "min" => Ok(args.iter().copied().fold(f64::INFINITY, f64::min)),
            (None, _) => Ok(args.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
        }
    }
}

/// A result as the model reads it: integers without a fraction, others as Rust prints them.
pub fn format_number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_follows_precedence_and_associativity() {
        assert_eq!(evaluate("1 + 2 * 3"), Ok(7.0));
        assert_eq!(evaluate("(1 + 2) * 3"), Ok(9.0));
        assert_eq!(evaluate("2 ^ 3 ^ 2"), Ok(512.0));
        assert_eq!(evaluate("-2 ^ 2"), Ok(-4.0));
        assert_eq!(evaluate("10 % 4 - -1"), Ok(3.0));
        assert_eq!(evaluate("max(1, sqrt(16), 3) + 1.5e1"), Ok(19.0));
    }

    #[test]
    fn anything_else_is_a_parse_error() {
        for bad in [
            "__import__('os').system('id')",
            "1 +",
            "2 ** 3",
            "x = 1",
            "1; 2",
            "eval(1)",
            "",
            "((1)",
        ] {
            assert!(evaluate(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(evaluate("1/0").is_err());
        assert!(evaluate(&"(".repeat(100)).is_err());
    }
}
