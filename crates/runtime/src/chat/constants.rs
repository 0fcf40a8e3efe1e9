//! Refuses templates whose constant expressions would be huge when compiled.
//!
//! minijinja folds expressions made only of literals while it compiles a template, before
//! any render and so before the byte meter ([`super::meter`]) can see them: `'x' * 10**8`
//! becomes a 100 MB string, `['x'] * 10**8` a hundred million values. Only repetition (and
//! the integer arithmetic that makes its count) can make a folded value much larger than the
//! template's own text, so the parsed template is walked and every constant expression's
//! size is bounded, without evaluating it, before minijinja compiles it.

use minijinja::machinery::ast::{self, BinOpKind, CallArg, Expr, Stmt, UnaryOpKind};

/// Bytes a folded constant may hold; real templates' constants are a few words.
pub(super) const MAX_CONSTANT_BYTES: u64 = 1 << 20;

/// What a constant expression may become: its integer value when it is one, a bound on its
/// size in bytes (elements count [`super::meter`]'s 32 bytes each), and a bound on the bytes
/// alive while it is folded (its operands' values beside the result: minijinja folds every
/// operand of a constant expression, even where the result is small, as in `not …` or
/// `… == 1`).
#[derive(Clone, Copy)]
struct Folded {
    int: Option<i128>,
    bytes: u64,
    peak: u64,
}

const ELEMENT: u64 = 32;

fn folded(expr: &Expr<'_>) -> Option<Folded> {
    // The result of `own` from `parts`, whose values are alive while it is made.
    let combine = |parts: &[Folded], int: Option<i128>, bytes: u64| {
        let alive = parts.iter().fold(bytes, |a, p| a.saturating_add(p.bytes));
        let peak = parts.iter().fold(alive, |a, p| a.max(p.peak));
        Folded { int, bytes, peak }
    };
    Some(match expr {
        Expr::Const(c) => {
            let value = &c.value;
            let int = if value.is_integer() { value.as_i64().map(i128::from) } else { None };
            let bytes = value.as_str().map_or(16, |s| s.len() as u64);
            Folded { int, bytes, peak: bytes }
        }
        Expr::List(l) => {
            let parts = l.items.iter().map(folded).collect::<Option<Vec<_>>>()?;
            let bytes = parts.iter().fold(0u64, |a, p| a.saturating_add(p.bytes).saturating_add(ELEMENT));
            combine(&parts, None, bytes)
        }
        Expr::Map(m) => {
            let parts = m.keys.iter().chain(&m.values).map(folded).collect::<Option<Vec<_>>>()?;
            let bytes = parts.iter().fold(0u64, |a, p| a.saturating_add(p.bytes).saturating_add(ELEMENT));
            combine(&parts, None, bytes)
        }
        Expr::UnaryOp(u) => {
            let inner = folded(&u.expr)?;
            match u.op {
                UnaryOpKind::Neg => combine(&[inner], inner.int.and_then(i128::checked_neg), inner.bytes),
                UnaryOpKind::Not => combine(&[inner], None, 8),
            }
        }
        Expr::BinOp(b) => {
            let (l, r) = (folded(&b.left)?, folded(&b.right)?);
            let ints = l.int.zip(r.int);
            let sum = l.bytes.saturating_add(r.bytes);
            let (int, bytes) = match b.op {
                BinOpKind::Mul => {
                    let times = |n: Option<i128>| n.map_or(0, |n| u64::try_from(n.unsigned_abs()).unwrap_or(u64::MAX));
                    // (a list's bytes already count an element's 32 for each item)
                    let bytes = l.bytes.saturating_mul(times(r.int)).max(r.bytes.saturating_mul(times(l.int)));
                    (ints.and_then(|(a, b)| a.checked_mul(b)), bytes.max(sum))
                }
                BinOpKind::Pow => {
                    let int = ints.and_then(|(a, b)| u32::try_from(b).ok().and_then(|b| a.checked_pow(b)));
                    // An overflowing power is an error, not a value, when minijinja folds it;
                    // as a count it would be unbounded, so it is taken as one.
                    (int, if ints.is_some() && int.is_none() { u64::MAX } else { 16 })
                }
                BinOpKind::Add => (ints.and_then(|(a, b)| a.checked_add(b)), sum),
                BinOpKind::Sub => (ints.and_then(|(a, b)| a.checked_sub(b)), sum),
                // never larger in magnitude than the dividend (or the divisor, for `%`)
                BinOpKind::Div | BinOpKind::FloorDiv | BinOpKind::Rem => {
                    (ints.map(|(a, b)| if b == 0 { a } else { a.abs().max(b.abs()) }), sum)
                }
                BinOpKind::Concat | BinOpKind::ScAnd | BinOpKind::ScOr => (l.int.or(r.int), sum),
                BinOpKind::Eq | BinOpKind::Ne | BinOpKind::Lt | BinOpKind::Lte | BinOpKind::Gt | BinOpKind::Gte | BinOpKind::In => {
                    (None, 8)
                }
            };
            combine(&[l, r], int, bytes)
        }
        Expr::Compare(c) => {
            let mut parts = vec![folded(&c.expr)?];
            for op in &c.ops {
                parts.push(folded(&op.expr)?);
            }
            combine(&parts, None, 8)
        }
        _ => return None,
    })
}

/// The first constant expression in `stmt` that could fold to more than `limit` bytes, as its
/// line in the template.
pub(super) fn huge_constant(stmt: &Stmt<'_>, limit: u64) -> Option<usize> {
    let mut walker = Walker { limit, found: None };
    walker.stmt(stmt);
    walker.found
}

struct Walker {
    limit: u64,
    found: Option<usize>,
}

impl Walker {
    fn stmts(&mut self, stmts: &[Stmt<'_>]) {
        for s in stmts {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, stmt: &Stmt<'_>) {
        if self.found.is_some() {
            return;
        }
        match stmt {
            Stmt::Template(t) => self.stmts(&t.children),
            Stmt::EmitExpr(e) => self.expr(&e.expr),
            Stmt::EmitRaw(_) | Stmt::Continue(_) | Stmt::Break(_) => {}
            Stmt::ForLoop(f) => {
                self.expr(&f.target);
                self.expr(&f.iter);
                if let Some(e) = &f.filter_expr {
                    self.expr(e);
                }
                self.stmts(&f.body);
                self.stmts(&f.else_body);
            }
            Stmt::IfCond(i) => {
                self.expr(&i.expr);
                self.stmts(&i.true_body);
                self.stmts(&i.false_body);
            }
            Stmt::WithBlock(w) => {
                for (target, value) in &w.assignments {
                    self.expr(target);
                    self.expr(value);
                }
                self.stmts(&w.body);
            }
            Stmt::Set(s) => {
                self.expr(&s.target);
                self.expr(&s.expr);
            }
            Stmt::SetBlock(s) => {
                self.expr(&s.target);
                if let Some(f) = &s.filter {
                    self.expr(f);
                }
                self.stmts(&s.body);
            }
            Stmt::AutoEscape(a) => {
                self.expr(&a.enabled);
                self.stmts(&a.body);
            }
            Stmt::FilterBlock(f) => {
                self.expr(&f.filter);
                self.stmts(&f.body);
            }
            Stmt::Block(b) => self.stmts(&b.body),
            Stmt::Import(i) => {
                self.expr(&i.expr);
                self.expr(&i.name);
            }
            Stmt::FromImport(i) => self.expr(&i.expr),
            Stmt::Extends(e) => self.expr(&e.name),
            Stmt::Include(i) => self.expr(&i.name),
            Stmt::Macro(m) => self.macro_decl(m),
            Stmt::CallBlock(c) => {
                self.call(&c.call);
                self.macro_decl(&c.macro_decl);
            }
            Stmt::Do(d) => self.call(&d.call),
        }
    }

    fn macro_decl(&mut self, m: &ast::Macro<'_>) {
        for e in m.args.iter().chain(&m.defaults) {
            self.expr(e);
        }
        self.stmts(&m.body);
    }

    fn call(&mut self, c: &ast::Call<'_>) {
        self.expr(&c.expr);
        self.args(&c.args);
    }

    fn args(&mut self, args: &[CallArg<'_>]) {
        for a in args {
            match a {
                CallArg::Pos(e) | CallArg::Kwarg(_, e) | CallArg::PosSplat(e) | CallArg::KwargSplat(e) => self.expr(e),
            }
        }
    }

    fn expr(&mut self, expr: &Expr<'_>) {
        if self.found.is_some() {
            return;
        }
        // The compiler folds the outermost constant expression whole.
        if let Some(f) = folded(expr) {
            if f.peak > self.limit {
                self.found = Some(expr.span().start_line as usize);
            }
            return;
        }
        match expr {
            Expr::Var(_) | Expr::Const(_) => {}
            Expr::Slice(s) => {
                self.expr(&s.expr);
                for e in [&s.start, &s.stop, &s.step].into_iter().flatten() {
                    self.expr(e);
                }
            }
            Expr::UnaryOp(u) => self.expr(&u.expr),
            Expr::BinOp(b) => {
                self.expr(&b.left);
                self.expr(&b.right);
            }
            Expr::Compare(c) => {
                self.expr(&c.expr);
                for op in &c.ops {
                    self.expr(&op.expr);
                }
            }
            Expr::IfExpr(i) => {
                self.expr(&i.test_expr);
                self.expr(&i.true_expr);
                if let Some(e) = &i.false_expr {
                    self.expr(e);
                }
            }
            Expr::Filter(f) => {
                if let Some(e) = &f.expr {
                    self.expr(e);
                }
                self.args(&f.args);
            }
            Expr::Test(t) => {
                self.expr(&t.expr);
                self.args(&t.args);
            }
            Expr::GetAttr(g) => self.expr(&g.expr),
            Expr::GetItem(g) => {
                self.expr(&g.expr);
                self.expr(&g.subscript_expr);
            }
            Expr::Call(c) => self.call(c),
            Expr::List(l) => {
                for e in &l.items {
                    self.expr(e);
                }
            }
            Expr::Map(m) => {
                for e in m.keys.iter().chain(&m.values) {
                    self.expr(e);
                }
            }
        }
    }
}
