//! A small evaluator for `ComfyMathExpression` (Python/simpleeval syntax), so sizes and frame
//! counts computed from constants (`a * b + 1`, `(a // 32) * 32`) are known statically.

/// A Python number: int or float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    fn f(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }

    fn truthy(self) -> bool {
        self.f() != 0.0
    }

    /// Python's `int()`: truncation toward zero.
    pub(crate) fn to_int(self) -> Option<i64> {
        match self {
            Num::Int(i) => Some(i),
            Num::Float(f) if f.is_finite() => Some(f.trunc() as i64),
            Num::Float(_) => None,
        }
    }
}

fn b(v: bool) -> Num {
    Num::Int(v as i64)
}

/// Evaluates `expr` with variables from `var` (`a`…`z`); `None` when anything is unknown or
/// outside the supported syntax.
pub(crate) fn eval(expr: &str, var: &dyn Fn(&str) -> Option<Num>) -> Option<Num> {
    let tokens = tokenize(expr)?;
    let mut p = Parser {
        t: tokens,
        i: 0,
        var,
    };
    let v = p.ternary()?;
    (p.i == p.t.len()).then_some(v)
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(Num),
    Name(String),
    Op(String),
}

fn tokenize(s: &str) -> Option<Vec<Tok>> {
    let c: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch.is_ascii_digit()
            || (ch == '.' && c.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            let start = i;
            while i < c.len() && (c[i].is_ascii_digit() || c[i] == '.' || c[i] == '_') {
                i += 1;
            }
            let text: String = c[start..i].iter().filter(|x| **x != '_').collect();
            out.push(Tok::Num(if text.contains('.') {
                Num::Float(text.parse().ok()?)
            } else {
                Num::Int(text.parse().ok()?)
            }));
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(Tok::Name(c[start..i].iter().collect()));
        } else {
            let two: String = c[i..(i + 2).min(c.len())].iter().collect();
            if ["//", "**", "<=", ">=", "==", "!=", "<<", ">>"].contains(&two.as_str()) {
                out.push(Tok::Op(two));
                i += 2;
            } else if "+-*/%()<>,&|^~".contains(ch) {
                out.push(Tok::Op(ch.to_string()));
                i += 1;
            } else {
                return None;
            }
        }
    }
    Some(out)
}

struct Parser<'a> {
    t: Vec<Tok>,
    i: usize,
    var: &'a dyn Fn(&str) -> Option<Num>,
}

impl Parser<'_> {
    fn peek_op(&self, op: &str) -> bool {
        matches!(self.t.get(self.i), Some(Tok::Op(o)) if o == op)
    }

    fn peek_name(&self, name: &str) -> bool {
        matches!(self.t.get(self.i), Some(Tok::Name(n)) if n == name)
    }

    fn eat_op(&mut self, op: &str) -> bool {
        let yes = self.peek_op(op);
        self.i += yes as usize;
        yes
    }

    fn ternary(&mut self) -> Option<Num> {
        let then = self.or()?;
        if self.peek_name("if") {
            self.i += 1;
            let cond = self.or()?;
            if !self.peek_name("else") {
                return None;
            }
            self.i += 1;
            let other = self.ternary()?;
            return Some(if cond.truthy() { then } else { other });
        }
        Some(then)
    }

    fn or(&mut self) -> Option<Num> {
        let mut v = self.and()?;
        while self.peek_name("or") {
            self.i += 1;
            let r = self.and()?;
            v = if v.truthy() { v } else { r };
        }
        Some(v)
    }

    fn and(&mut self) -> Option<Num> {
        let mut v = self.not()?;
        while self.peek_name("and") {
            self.i += 1;
            let r = self.not()?;
            v = if v.truthy() { r } else { v };
        }
        Some(v)
    }

    fn not(&mut self) -> Option<Num> {
        if self.peek_name("not") {
            self.i += 1;
            return Some(b(!self.not()?.truthy()));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Option<Num> {
        let l = self.bits()?;
        for op in ["<=", ">=", "==", "!=", "<", ">"] {
            if self.eat_op(op) {
                let r = self.bits()?;
                let (x, y) = (l.f(), r.f());
                return Some(b(match op {
                    "<=" => x <= y,
                    ">=" => x >= y,
                    "==" => x == y,
                    "!=" => x != y,
                    "<" => x < y,
                    _ => x > y,
                }));
            }
        }
        Some(l)
    }

    fn bits(&mut self) -> Option<Num> {
        let mut v = self.shift()?;
        loop {
            let op = ["&", "|", "^"].into_iter().find(|o| self.peek_op(o));
            let Some(op) = op else {
                return Some(v);
            };
            self.i += 1;
            let (x, y) = (int_of(v)?, int_of(self.shift()?)?);
            v = Num::Int(match op {
                "&" => x & y,
                "|" => x | y,
                _ => x ^ y,
            });
        }
    }

    fn shift(&mut self) -> Option<Num> {
        let mut v = self.arith()?;
        loop {
            let op = ["<<", ">>"].into_iter().find(|o| self.peek_op(o));
            let Some(op) = op else {
                return Some(v);
            };
            self.i += 1;
            let (x, y) = (int_of(v)?, int_of(self.arith()?)?);
            let y = u32::try_from(y).ok().filter(|y| *y < 63)?;
            v = Num::Int(if op == "<<" { x << y } else { x >> y });
        }
    }

    fn arith(&mut self) -> Option<Num> {
        let mut v = self.term()?;
        loop {
            let op = ["+", "-"].into_iter().find(|o| self.peek_op(o));
            let Some(op) = op else {
                return Some(v);
            };
            self.i += 1;
            let r = self.term()?;
            v = match (v, r) {
                (Num::Int(x), Num::Int(y)) => Num::Int(if op == "+" {
                    x.checked_add(y)?
                } else {
                    x.checked_sub(y)?
                }),
                _ => Num::Float(if op == "+" {
                    v.f() + r.f()
                } else {
                    v.f() - r.f()
                }),
            };
        }
    }

    fn term(&mut self) -> Option<Num> {
        let mut v = self.unary()?;
        loop {
            let op = ["*", "//", "/", "%"].into_iter().find(|o| self.peek_op(o));
            let Some(op) = op else {
                return Some(v);
            };
            self.i += 1;
            let r = self.unary()?;
            v = match (op, v, r) {
                ("*", Num::Int(x), Num::Int(y)) => Num::Int(x.checked_mul(y)?),
                ("*", _, _) => Num::Float(v.f() * r.f()),
                ("/", _, _) if r.f() != 0.0 => Num::Float(v.f() / r.f()),
                ("//", Num::Int(x), Num::Int(y)) if y != 0 => {
                    Num::Int(x.div_euclid(y) - i64::from(y < 0 && x.rem_euclid(y) != 0))
                }
                ("//", _, _) if r.f() != 0.0 => Num::Float((v.f() / r.f()).floor()),
                ("%", Num::Int(x), Num::Int(y)) if y != 0 => Num::Int(((x % y) + y) % y),
                ("%", _, _) if r.f() != 0.0 => Num::Float(v.f() - r.f() * (v.f() / r.f()).floor()),
                _ => return None,
            };
        }
    }

    fn unary(&mut self) -> Option<Num> {
        if self.eat_op("-") {
            return Some(match self.unary()? {
                Num::Int(i) => Num::Int(-i),
                Num::Float(f) => Num::Float(-f),
            });
        }
        if self.eat_op("+") {
            return self.unary();
        }
        if self.eat_op("~") {
            return Some(Num::Int(!int_of(self.unary()?)?));
        }
        self.power()
    }

    fn power(&mut self) -> Option<Num> {
        let base = self.atom()?;
        if self.eat_op("**") {
            let e = self.unary()?;
            return Some(pow(base, e));
        }
        Some(base)
    }

    fn atom(&mut self) -> Option<Num> {
        match self.t.get(self.i).cloned()? {
            Tok::Num(n) => {
                self.i += 1;
                Some(n)
            }
            Tok::Op(o) if o == "(" => {
                self.i += 1;
                let v = self.ternary()?;
                self.eat_op(")").then_some(v)
            }
            Tok::Name(name) => {
                self.i += 1;
                if self.eat_op("(") {
                    let mut args = Vec::new();
                    if !self.eat_op(")") {
                        loop {
                            args.push(self.ternary()?);
                            if self.eat_op(")") {
                                break;
                            }
                            if !self.eat_op(",") {
                                return None;
                            }
                        }
                    }
                    return call(&name, &args);
                }
                match name.as_str() {
                    "True" => Some(Num::Int(1)),
                    "False" => Some(Num::Int(0)),
                    _ => (self.var)(&name),
                }
            }
            Tok::Op(_) => None,
        }
    }
}

fn int_of(n: Num) -> Option<i64> {
    match n {
        Num::Int(i) => Some(i),
        Num::Float(_) => None,
    }
}

fn pow(base: Num, e: Num) -> Num {
    match (base, e) {
        (Num::Int(x), Num::Int(y)) if (0..63).contains(&y) => match x.checked_pow(y as u32) {
            Some(v) => Num::Int(v),
            None => Num::Float((x as f64).powf(y as f64)),
        },
        _ => Num::Float(base.f().powf(e.f())),
    }
}

fn call(name: &str, args: &[Num]) -> Option<Num> {
    let one = || args.first().copied().filter(|_| args.len() == 1);
    let float = |f: f64| Some(Num::Float(f));
    match name {
        "min" | "max" if !args.is_empty() => {
            let mut best = args[0];
            for a in &args[1..] {
                let better = if name == "min" {
                    a.f() < best.f()
                } else {
                    a.f() > best.f()
                };
                if better {
                    best = *a;
                }
            }
            Some(best)
        }
        "sum" => Some(args.iter().fold(Num::Int(0), |acc, a| match (acc, a) {
            (Num::Int(x), Num::Int(y)) => Num::Int(x + y),
            _ => Num::Float(acc.f() + a.f()),
        })),
        "abs" => Some(match one()? {
            Num::Int(i) => Num::Int(i.abs()),
            Num::Float(f) => Num::Float(f.abs()),
        }),
        "round" => {
            let v = one()?.f();
            // Python rounds half to even.
            let r = v.round();
            let r = if (v - v.trunc()).abs() == 0.5 && r % 2.0 != 0.0 {
                r - v.signum()
            } else {
                r
            };
            Some(Num::Int(r as i64))
        }
        "floor" => Some(Num::Int(one()?.f().floor() as i64)),
        "ceil" => Some(Num::Int(one()?.f().ceil() as i64)),
        "int" => one()?.to_int().map(Num::Int),
        "float" => float(one()?.f()),
        "sqrt" => float(one()?.f().sqrt()),
        "log" => float(one()?.f().ln()),
        "log2" => float(one()?.f().log2()),
        "log10" => float(one()?.f().log10()),
        "sin" => float(one()?.f().sin()),
        "cos" => float(one()?.f().cos()),
        "tan" => float(one()?.f().tan()),
        "pow" if args.len() == 2 => Some(pow(args[0], args[1])),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(s: &str) -> Option<Num> {
        eval(s, &|n| match n {
            "a" => Some(Num::Int(5)),
            "b" => Some(Num::Int(16)),
            "c" => Some(Num::Float(2.5)),
            _ => None,
        })
    }

    #[test]
    fn template_expressions() {
        assert_eq!(ev("a * b + 1"), Some(Num::Int(81)));
        assert_eq!(ev("(b // 3) * 3"), Some(Num::Int(15)));
        assert_eq!(ev("a/2"), Some(Num::Float(2.5)));
        assert_eq!(ev("b & -8"), Some(Num::Int(16)));
        assert_eq!(ev("a & ~1"), Some(Num::Int(4)));
        assert_eq!(ev("max(((a + 15) // 16) * 16, 256)"), Some(Num::Int(256)));
        assert_eq!(ev("floor(c * 3)"), Some(Num::Int(7)));
        assert_eq!(ev("a % b if b > 0 else 0"), Some(Num::Int(5)));
        assert_eq!(ev("-7 // 2"), Some(Num::Int(-4)));
        assert_eq!(ev("-7 % 3"), Some(Num::Int(2)));
        assert_eq!(ev("round(2.5)"), Some(Num::Int(2)));
        assert_eq!(ev("2 ** 10"), Some(Num::Int(1024)));
        assert_eq!(
            ev("max(5, round(c * 24)) + (5 - (max(5, round(c * 24)) % 17)) % 17"),
            Some(Num::Int(73))
        );
        assert_eq!(ev("(a % 4 == 1) and ((b - 1) % 4 == 0)"), Some(Num::Int(0)));
        assert_eq!(ev("z + 1"), None);
        assert_eq!(ev("a +"), None);
        assert_eq!(ev("a / 0"), None);
        assert_eq!(ev("import os"), None);
    }
}
