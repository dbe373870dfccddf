//! Game of 24: puzzles, a solver that finds an expression for each, and a checker for the
//! model's answers. No data is downloaded: puzzles are generated from a seed and kept only when
//! the solver solves them.

/// Four numbers from 1 to 13.
pub(crate) type Puzzle = [u32; 4];

/// A small deterministic generator (64-bit LCG), so a seed always gives the same puzzles.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1))
    }

    fn next(&mut self) -> u64 {
        self.0 =
            self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    /// A solvable puzzle and one of its solutions.
    pub(crate) fn puzzle(&mut self) -> (Puzzle, String) {
        loop {
            let p = [0; 4].map(|_| (self.next() % 13) as u32 + 1);
            if let Some(solution) = solve(&p) {
                return (p, solution);
            }
        }
    }
}

/// An expression for 24 from the four numbers with + - * / and parentheses, if there is one.
pub(crate) fn solve(puzzle: &Puzzle) -> Option<String> {
    let items: Vec<(f64, String)> = puzzle.iter().map(|&n| (f64::from(n), n.to_string())).collect();
    search(&items)
}

fn search(items: &[(f64, String)]) -> Option<String> {
    if items.len() == 1 {
        return ((items[0].0 - 24.0).abs() < 1e-9).then(|| items[0].1.clone());
    }
    for i in 0..items.len() {
        for j in 0..items.len() {
            if i == j {
                continue;
            }
            let (a, b) = (&items[i], &items[j]);
            let rest: Vec<(f64, String)> = items
                .iter()
                .enumerate()
                .filter(|(k, _)| *k != i && *k != j)
                .map(|(_, x)| x.clone())
                .collect();
            let mut options = vec![
                (a.0 + b.0, format!("({} + {})", a.1, b.1)),
                (a.0 - b.0, format!("({} - {})", a.1, b.1)),
                (a.0 * b.0, format!("({} * {})", a.1, b.1)),
            ];
            if b.0.abs() > 1e-9 {
                options.push((a.0 / b.0, format!("({} / {})", a.1, b.1)));
            }
            for option in options {
                let mut next = rest.clone();
                next.push(option);
                if let Some(found) = search(&next) {
                    return Some(found);
                }
            }
        }
    }
    None
}

/// Whether `answer` holds an expression (on its last line that has digits, after `Answer:` if
/// present, before any `=`) that uses exactly the puzzle's numbers and equals 24.
pub(crate) fn check(puzzle: &Puzzle, answer: &str) -> bool {
    let Some(line) = answer.lines().rev().find(|l| l.chars().any(|c| c.is_ascii_digit())) else {
        return false;
    };
    let line = line.rsplit("Answer:").next().unwrap_or(line);
    let expr = line.split('=').next().unwrap_or(line).replace(['×', 'x'], "*").replace('÷', "/");
    let mut parser = Parser {
        chars: expr.chars().filter(|c| !c.is_whitespace()).collect(),
        pos: 0,
        numbers: Vec::new(),
    };
    let Some(value) = parser.expr() else { return false };
    if parser.pos != parser.chars.len() {
        return false;
    }
    let mut used = parser.numbers;
    let mut want = puzzle.to_vec();
    used.sort_unstable();
    want.sort_unstable();
    used == want && (value - 24.0).abs() < 1e-9
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    numbers: Vec<u32>,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn expr(&mut self) -> Option<f64> {
        let mut value = self.term()?;
        while let Some(op @ ('+' | '-')) = self.peek() {
            self.pos += 1;
            let rhs = self.term()?;
            value = if op == '+' { value + rhs } else { value - rhs };
        }
        Some(value)
    }

    fn term(&mut self) -> Option<f64> {
        let mut value = self.atom()?;
        while let Some(op @ ('*' | '/')) = self.peek() {
            self.pos += 1;
            let rhs = self.atom()?;
            value = if op == '*' { value * rhs } else { value / rhs };
        }
        Some(value)
    }

    fn atom(&mut self) -> Option<f64> {
        if self.peek() == Some('(') {
            self.pos += 1;
            let value = self.expr()?;
            (self.peek() == Some(')')).then_some(())?;
            self.pos += 1;
            return Some(value);
        }
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let n: u32 = self.chars[start..self.pos].iter().collect::<String>().parse().ok()?;
        self.numbers.push(n);
        Some(f64::from(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_solver_and_the_checker_agree() {
        let mut rng = Rng::new(7);
        for _ in 0..20 {
            let (p, solution) = rng.puzzle();
            assert!(check(&p, &solution), "{p:?} {solution}");
        }
        assert!(solve(&[1, 1, 1, 1]).is_none());
        assert!(check(&[4, 6, 1, 1], "Answer: 4 × 6 × 1 × 1 = 24"));
        assert!(!check(&[4, 6, 1, 1], "Answer: 4 * 6 = 24"), "every number once");
        assert!(!check(&[4, 6, 1, 1], "Answer: (4 + 6) * 1 + 1"), "not 24");
    }
}
