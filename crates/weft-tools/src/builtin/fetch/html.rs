//! HTML to text with bounded work, for `fetch_url`.
//!
//! A real parser (html5ever, the tree html2text renders) is quadratic on some pages: for each
//! new element it may scan its whole stack of open elements, so a 220 KB page of 20,000 nested
//! `<div>`s took 42 s, and the renderer recurses over the tree's depth. Two caps keep every page
//! cheap, whatever it holds:
//!
//! - **the parser's work**: every step the tree builder takes over its stack of open elements or
//!   its list of formatting elements is counted (each is a call into the tree it builds), and the
//!   document is fed in small chunks; once [`MAX_PARSE_STEPS`] is spent, the rest of the page is
//!   cut (said in the text). A megabyte of ordinary markup (sections, lists, tables, ten levels
//!   deep) takes about a fifteenth of it; 20,000 nested `<div>`s would take hundreds of times
//!   more;
//! - **the depth**: the parsed tree is cut at [`MAX_DEPTH`] levels before it is rendered, the text
//!   of deeper elements kept, flattened into the element at that depth.
//!
//! [`to_text`] is blocking work: `fetch_url` runs it on a blocking thread, never on the async
//! workers, and sets the `stop` flag it gives when the call ends first (its timeout, an abort),
//! so the conversion stops at the next chunk rather than running on unseen.

use std::borrow::Cow;
use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};

use html2text::{Handle, RcDom};
use html5ever::interface::{ElementFlags, NodeOrText, QuirksMode, TreeSink};
use html5ever::tendril::{ByteTendril, StrTendril, TendrilSink};
use html5ever::{Attribute, ExpandedName, QualName};
use weft_tool_api::ToolError;

/// The most steps the parser may take over its stacks for one page.
pub const MAX_PARSE_STEPS: u64 = 16_000_000;
/// The deepest element rendered as structure; deeper text is flattened into it.
pub const MAX_DEPTH: usize = 128;
/// How much of the page the parser is fed at once (the work cap and the stop flag are
/// checked between chunks).
const CHUNK: usize = 256;
/// The width text is wrapped to.
const WIDTH: usize = 100;

/// `html` as text. `Err` when `stop` was set (the caller gave up) or the page cannot be
/// rendered.
pub fn to_text(html: &[u8], stop: &AtomicBool) -> Result<String, ToolError> {
    let steps = Rc::new(Cell::new(0u64));
    let sink = Counted { dom: RcDom::default(), steps: Rc::clone(&steps) };
    let opts = html5ever::ParseOpts {
        tree_builder: html5ever::tree_builder::TreeBuilderOpts {
            scripting_enabled: false,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut parser = html5ever::parse_document(sink, opts).from_utf8();
    let mut cut_at = None;
    for (i, chunk) in html.chunks(CHUNK).enumerate() {
        if stop.load(Ordering::Relaxed) {
            return Err(stopped());
        }
        if steps.get() > MAX_PARSE_STEPS {
            cut_at = Some(i * CHUNK);
            break;
        }
        parser.process(ByteTendril::from_slice(chunk));
    }
    let dom = parser.finish();
    if stop.load(Ordering::Relaxed) {
        return Err(stopped());
    }
    let flattened = flatten_below(&dom.document, MAX_DEPTH);
    let config = || html2text::config::plain().allow_width_overflow();
    let tree = config()
        .dom_to_render_tree(&dom)
        .map_err(|e| ToolError::failed(format!("unreadable HTML: {e}")))?;
    let mut text = config()
        .render_to_string(tree, WIDTH)
        .map_err(|e| ToolError::failed(format!("unreadable HTML: {e}")))?;
    if flattened {
        text.push_str(&format!(
            "\n[the page nests elements deeper than {MAX_DEPTH} levels; their text is kept, \
             flattened]"
        ));
    }
    if let Some(at) = cut_at {
        text.push_str(&format!(
            "\n[the page's markup is too complex to read past byte {at}; the rest is cut]"
        ));
    }
    Ok(text)
}

fn stopped() -> ToolError {
    ToolError::failed("the HTML conversion was stopped")
}

/// Cuts the tree at `max` levels below `root`: an element at that depth gets, as its children,
/// the text nodes of its whole subtree in document order. An element whose text children would
/// not be shown (a table's rows, a list's items) passes the cut on to its children, at most
/// [`STRUCTURE_SLACK`] levels further. Iterative (no recursion over a deep tree). Whether
/// anything was cut.
fn flatten_below(root: &Handle, max: usize) -> bool {
    let mut cut = false;
    let mut stack = vec![(Rc::clone(root), 0usize)];
    while let Some((node, depth)) = stack.pop() {
        if depth < max || (depth < max + STRUCTURE_SLACK && is_structure(&node)) {
            for child in node.children.borrow().iter() {
                stack.push((Rc::clone(child), depth + 1));
            }
            continue;
        }
        let children = node.children.borrow().clone();
        if !children.iter().any(|c| matches!(c.data, html2text::Element { .. })) {
            continue;
        }
        cut = true;
        let mut texts = Vec::new();
        let mut pending: Vec<Handle> = children.into_iter().rev().collect();
        while let Some(n) = pending.pop() {
            match n.data {
                html2text::Element { .. } => {
                    pending.extend(n.children.borrow().iter().rev().cloned());
                }
                html2text::Comment { .. } | html2text::Document => {}
                _ => texts.push(n),
            }
        }
        for text in &texts {
            text.parent.set(Some(Rc::downgrade(&node)));
        }
        *node.children.borrow_mut() = texts;
    }
    cut
}

/// How many levels past the cut a table's or list's structure may go on to reach a cell or an
/// item.
const STRUCTURE_SLACK: usize = 4;

/// Whether `node` is an element that holds structure rather than text (its direct text is not
/// rendered): a table, its sections and rows, a list.
fn is_structure(node: &Handle) -> bool {
    match &node.data {
        html2text::Element { name, .. } => matches!(
            name.local.as_ref(),
            "table" | "thead" | "tbody" | "tfoot" | "tr" | "colgroup" | "ul" | "ol" | "dl" | "menu"
        ),
        _ => false,
    }
}

/// html2text's DOM, counting the steps the tree builder takes through it: each look at an
/// element's name and each node comparison is one step of a scan.
struct Counted {
    dom: RcDom,
    steps: Rc<Cell<u64>>,
}

impl Counted {
    fn step(&self) {
        self.steps.set(self.steps.get().saturating_add(1));
    }
}

impl TreeSink for Counted {
    type Handle = Handle;
    type Output = RcDom;
    type ElemName<'a> = ExpandedName<'a>;

    fn finish(self) -> RcDom {
        self.dom
    }
    fn parse_error(&self, _msg: Cow<'static, str>) {
        // Not kept: a hostile page could make the list as long as the page.
    }
    fn get_document(&self) -> Handle {
        self.dom.get_document()
    }
    fn elem_name<'a>(&'a self, target: &'a Handle) -> ExpandedName<'a> {
        self.step();
        self.dom.elem_name(target)
    }
    fn create_element(&self, name: QualName, attrs: Vec<Attribute>, flags: ElementFlags) -> Handle {
        self.step();
        self.dom.create_element(name, attrs, flags)
    }
    fn create_comment(&self, text: StrTendril) -> Handle {
        self.dom.create_comment(text)
    }
    fn create_pi(&self, target: StrTendril, data: StrTendril) -> Handle {
        self.dom.create_pi(target, data)
    }
    fn append(&self, parent: &Handle, child: NodeOrText<Handle>) {
        self.dom.append(parent, child)
    }
    fn append_based_on_parent_node(
        &self,
        element: &Handle,
        prev_element: &Handle,
        child: NodeOrText<Handle>,
    ) {
        self.dom.append_based_on_parent_node(element, prev_element, child)
    }
    fn append_doctype_to_document(
        &self,
        name: StrTendril,
        public_id: StrTendril,
        system_id: StrTendril,
    ) {
        self.dom.append_doctype_to_document(name, public_id, system_id)
    }
    fn get_template_contents(&self, target: &Handle) -> Handle {
        self.dom.get_template_contents(target)
    }
    fn same_node(&self, x: &Handle, y: &Handle) -> bool {
        self.step();
        self.dom.same_node(x, y)
    }
    fn set_quirks_mode(&self, mode: QuirksMode) {
        self.dom.set_quirks_mode(mode)
    }
    fn append_before_sibling(&self, sibling: &Handle, new_node: NodeOrText<Handle>) {
        self.dom.append_before_sibling(sibling, new_node)
    }
    fn add_attrs_if_missing(&self, target: &Handle, attrs: Vec<Attribute>) {
        self.dom.add_attrs_if_missing(target, attrs)
    }
    fn remove_from_parent(&self, target: &Handle) {
        self.dom.remove_from_parent(target)
    }
    fn reparent_children(&self, node: &Handle, new_parent: &Handle) {
        self.dom.reparent_children(node, new_parent)
    }
    fn is_mathml_annotation_xml_integration_point(&self, handle: &Handle) -> bool {
        self.dom.is_mathml_annotation_xml_integration_point(handle)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn text(html: &str) -> String {
        to_text(html.as_bytes(), &AtomicBool::new(false)).unwrap()
    }

    #[test]
    fn an_ordinary_page_is_text() {
        let page = text(
            "<html><head><title>T</title><script>var x=1;</script></head>\
             <body><h1>Weft</h1><p>Hello <b>world</b></p><ul><li>one</li><li>two</li></ul></body></html>",
        );
        assert!(
            page.contains("Weft") && page.contains("Hello") && page.contains("world"),
            "{page}"
        );
        assert!(page.contains("one") && !page.contains("var x"), "{page}");
        assert!(!page.contains("[the page"), "{page}");
    }

    #[test]
    fn deep_nesting_is_cut_and_its_text_kept() {
        let n = 1000;
        let page = text(&format!("{}deep text{}", "<div>".repeat(n), "</div>".repeat(n)));
        assert!(page.contains("deep text"), "{page}");
        assert!(page.contains(&format!("deeper than {MAX_DEPTH} levels")), "{page}");
        // Nested tables and lists, which the renderer lays out recursively.
        let n = 300;
        for (open, close) in [("<table><tr><td>", "</td></tr></table>"), ("<ul><li>", "</li></ul>")]
        {
            let page = text(&format!("{}inner{}", open.repeat(n), close.repeat(n)));
            // (Deep lists leave little width: the word may be wrapped.)
            assert!(page.contains("inn"), "{page}");
        }
    }

    #[test]
    fn a_quadratic_page_is_cut_by_the_work_cap() {
        // Each <div> makes the parser scan its whole stack: 100,000 of them would take
        // minutes; the cap cuts the page early.
        let n = 100_000;
        let page = text(&format!("before{}inner{}", "<div>".repeat(n), "</div>".repeat(n)));
        assert!(page.starts_with("before"), "{page}");
        assert!(page.contains("too complex to read past byte"), "{page}");
    }

    #[test]
    fn a_set_stop_flag_stops_the_conversion() {
        let err = to_text(b"<p>hi</p>", &AtomicBool::new(true)).unwrap_err();
        assert!(err.to_string().contains("stopped"), "{err}");
    }
}
