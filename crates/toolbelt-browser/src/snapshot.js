// Builds the outline browser_snapshot returns. Runs in an isolated world, so the page's own
// scripts cannot replace the functions used here or read the references kept here.
// The walk uses an explicit stack: a page nested 100,000 deep cannot overflow the JS stack.
(() => {
  const MAX_LINES = 4000;
  const MAX_NAME = 200;
  const refs = new Map();
  globalThis.__toolbeltRefs = refs;
  let nextRef = 1;
  const lines = [];
  let truncated = false;
  const SKIP = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "HEAD", "META", "LINK", "TITLE"]);
  const INTERACTIVE = new Set([
    "link", "button", "textbox", "searchbox", "checkbox", "radio", "combobox", "slider",
    "option", "switch", "tab", "menuitem", "spinbutton",
  ]);
  // Roles whose name is their text: the text is shown once, on the role's line.
  const NAMED_BY_TEXT = new Set(["link", "button", "heading", "option", "tab", "menuitem"]);
  const clean = (s) => (s || "").replace(/\s+/g, " ").trim();
  const cap = (s) => (s.length > MAX_NAME ? s.slice(0, MAX_NAME) + "…" : s);
  const quote = (s) => JSON.stringify(cap(s));

  function visible(el) {
    if (el.hidden || el.getAttribute("aria-hidden") === "true") return false;
    if (typeof el.checkVisibility === "function") {
      // display:none anywhere above, content-visibility, and visibility:hidden.
      if (!el.checkVisibility({ visibilityProperty: true })) return false;
      return true;
    }
    const style = getComputedStyle(el);
    return style.display !== "none" && style.visibility !== "hidden";
  }

  function roleOf(el) {
    const explicit = clean(el.getAttribute("role")).split(" ")[0];
    if (explicit) return explicit;
    switch (el.tagName) {
      case "A": return el.hasAttribute("href") ? "link" : null;
      case "BUTTON": case "SUMMARY": return "button";
      case "INPUT": {
        const type = (el.getAttribute("type") || "text").toLowerCase();
        if (type === "hidden") return "hidden";
        if (["button", "submit", "reset", "image"].includes(type)) return "button";
        if (type === "checkbox") return "checkbox";
        if (type === "radio") return "radio";
        if (type === "range") return "slider";
        if (type === "number") return "spinbutton";
        if (type === "search") return "searchbox";
        return "textbox";
      }
      case "TEXTAREA": return "textbox";
      case "SELECT": return "combobox";
      case "OPTION": return "option";
      case "IMG": return "img";
      case "H1": case "H2": case "H3": case "H4": case "H5": case "H6": return "heading";
      case "UL": case "OL": return "list";
      case "LI": return "listitem";
      case "NAV": return "navigation";
      case "MAIN": return "main";
      case "FORM": return "form";
      case "TABLE": return "table";
      case "TR": return "row";
      case "TD": return "cell";
      case "TH": return "columnheader";
      case "DIALOG": return "dialog";
      case "IFRAME": case "FRAME": return "iframe";
      case "P": return "paragraph";
    }
    if (el.isContentEditable && (el.parentElement === null || !el.parentElement.isContentEditable)) {
      return "textbox";
    }
    if (el.hasAttribute("onclick") || el.getAttribute("tabindex") === "0") return "generic-clickable";
    return null;
  }

  function nameOf(el, role) {
    const label = clean(el.getAttribute("aria-label"));
    if (label) return label;
    const by = el.getAttribute("aria-labelledby");
    if (by) {
      const text = clean(by.split(/\s+/).map((id) => document.getElementById(id))
        .filter(Boolean).map((e) => e.textContent.slice(0, MAX_NAME)).join(" "));
      if (text) return text;
    }
    if (el.tagName === "IMG") return clean(el.getAttribute("alt"));
    if (el.tagName === "INPUT" && ["button", "submit", "reset"].includes(el.type)) {
      return clean(el.value || el.type);
    }
    if (el.labels && el.labels.length) {
      return clean(Array.from(el.labels).map((l) => l.textContent.slice(0, MAX_NAME)).join(" "));
    }
    if (NAMED_BY_TEXT.has(role) || role === "generic-clickable") {
      return clean((el.innerText || el.textContent || "").slice(0, MAX_NAME * 4));
    }
    return clean(el.getAttribute("placeholder") || el.getAttribute("title") || "");
  }

  function describe(el, role) {
    const name = nameOf(el, role);
    let line = "- " + (role === "generic-clickable" ? "clickable" : role);
    if (name) line += " " + quote(name);
    if (role === "heading") line += ` [level=${el.tagName.length === 2 ? el.tagName[1] : (el.getAttribute("aria-level") || 2)}]`;
    if ((role === "checkbox" || role === "radio") && el.checked) line += " [checked]";
    if (el.disabled) line += " [disabled]";
    if (INTERACTIVE.has(role) || role === "generic-clickable") {
      const ref = "e" + nextRef++;
      refs.set(ref, el);
      line += ` [ref=${ref}]`;
    }
    if (role === "link") {
      const href = el.getAttribute("href");
      if (href) line += " [url=" + cap(href) + "]";
    }
    if ((role === "textbox" || role === "searchbox" || role === "spinbutton" || role === "combobox")
        && typeof el.value === "string" && el.value) {
      line += ": " + quote(el.value);
    }
    return line;
  }

  const root = document.body || document.documentElement;
  const stack = root ? [[root, 0, false]] : [];
  while (stack.length) {
    const [node, depth, consumed] = stack.pop();
    if (lines.length >= MAX_LINES) { truncated = true; break; }
    if (node.nodeType === Node.TEXT_NODE) {
      const text = clean(node.textContent);
      if (text && !consumed) lines.push("  ".repeat(depth) + "- text: " + quote(text));
      continue;
    }
    if (node.nodeType !== Node.ELEMENT_NODE || SKIP.has(node.tagName)) continue;
    if (!visible(node)) continue;
    const role = roleOf(node);
    if (role === "hidden") continue;
    let childDepth = depth;
    let childConsumed = consumed;
    if (role && node !== root) {
      lines.push("  ".repeat(depth) + describe(node, role));
      childDepth = depth + 1;
      if (NAMED_BY_TEXT.has(role) || role === "generic-clickable") childConsumed = true;
      if (role === "iframe" || role === "img") continue;
    }
    const children = node.shadowRoot
      ? [...node.shadowRoot.childNodes, ...node.childNodes]
      : node.childNodes;
    for (let i = children.length - 1; i >= 0; i--) {
      stack.push([children[i], childDepth, childConsumed]);
    }
  }
  return { title: document.title, url: location.href, outline: lines.join("\n"), truncated };
})()
