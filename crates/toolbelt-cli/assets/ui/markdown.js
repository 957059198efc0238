// A small Markdown renderer for the model's text: paragraphs, ATX headings, emphasis, inline
// code, fenced code blocks, lists, block quotes and links. It builds DOM nodes and writes every
// piece of the text with text nodes, so markup in the text is shown as the characters it is:
// there is no HTML pass-through, and no string is ever parsed as HTML. Links are made only for
// http and https URLs (anything else, `javascript:` included, stays text).
//
// Bounded: block nesting (quotes, lists) and inline nesting (emphasis) stop at fixed depths
// (deeper text is shown as written), and each search for a closing delimiter remembers where
// the delimiter next occurs, so unmatched delimiters cost linear time, not quadratic.

const MAX_BLOCK_DEPTH = 6;
const MAX_INLINE_DEPTH = 4;
/** Closing delimiters tried for one opening one before it is taken for text. */
const MAX_TRIES = 16;

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const BULLET = /^( {0,3})([-*+])[ \t]+(.*)$/;
const ORDERED = /^( {0,3})(\d{1,9})([.)])[ \t]+(.*)$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const BLANK = /^\s*$/;

function node(tag, cls) {
  const n = document.createElement(tag);
  if (cls) n.className = cls;
  return n;
}

/** `text` as Markdown: a `div.md` of block elements. */
export function renderMarkdown(text) {
  const root = node('div', 'md');
  blocks(String(text ?? '').replace(/\r\n?/g, '\n').split('\n'), root, 0);
  return root;
}

/** Appends the blocks of `lines` to `parent`. */
function blocks(lines, parent, depth) {
  let i = 0;
  let paragraph = [];
  const flush = () => {
    if (paragraph.length) {
      const p = node('p');
      inline(paragraph.join('\n'), p, 0);
      parent.append(p);
      paragraph = [];
    }
  };
  while (i < lines.length) {
    const line = lines[i];
    if (BLANK.test(line)) {
      flush();
      i += 1;
      continue;
    }
    const fence = FENCE.exec(line);
    if (fence) {
      flush();
      const marker = fence[1];
      const body = [];
      i += 1;
      while (i < lines.length && !new RegExp(`^ {0,3}${marker[0] === '`' ? '`' : '~'}{${marker.length},}\\s*$`).test(lines[i])) {
        body.push(lines[i]);
        i += 1;
      }
      i += 1; // the closing fence (or the end of the text)
      const pre = node('pre', 'code');
      const code = node('code');
      if (fence[2]) code.dataset.lang = fence[2];
      code.textContent = body.join('\n');
      pre.append(code);
      parent.append(pre);
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      flush();
      const h = node(`h${heading[1].length}`);
      inline(heading[2] || '', h, 0);
      parent.append(h);
      i += 1;
      continue;
    }
    if (RULE.test(line) && paragraph.length === 0) {
      parent.append(node('hr'));
      i += 1;
      continue;
    }
    if (QUOTE.test(line)) {
      flush();
      const inner = [];
      while (i < lines.length && QUOTE.test(lines[i])) {
        inner.push(QUOTE.exec(lines[i])[1]);
        i += 1;
      }
      const quote = node('blockquote');
      if (depth < MAX_BLOCK_DEPTH) blocks(inner, quote, depth + 1);
      else quote.append(inner.join('\n'));
      parent.append(quote);
      continue;
    }
    const ordered = ORDERED.exec(line);
    // Inside a paragraph only a list from 1 starts a list ("2019. was a year" stays text).
    if (BULLET.test(line) || (ordered && (paragraph.length === 0 || ordered[2] === '1'))) {
      flush();
      i = list(lines, i, parent, depth);
      continue;
    }
    paragraph.push(line);
    i += 1;
  }
  flush();
}

/** A list starting at `lines[start]`; returns the index after it. */
function list(lines, start, parent, depth) {
  const first = BULLET.exec(lines[start]);
  const ordered = !first;
  const head = first || ORDERED.exec(lines[start]);
  const indent = head[1].length;
  const marker = ordered ? head[3] : head[2];
  const element = node(ordered ? 'ol' : 'ul');
  if (ordered && head[2] !== '1') element.setAttribute('start', String(Number(head[2])));
  const sameKind = (line) => {
    const m = ordered ? ORDERED.exec(line) : BULLET.exec(line);
    return m && m[1].length === indent && (ordered ? m[3] : m[2]) === marker ? m : null;
  };
  let i = start;
  while (i < lines.length) {
    const m = sameKind(lines[i]);
    if (!m) break;
    const body = [ordered ? m[4] : m[3]];
    // The item's content is indented past its marker.
    const width = lines[i].length - body[0].length;
    i += 1;
    let blankBefore = false;
    while (i < lines.length) {
      const line = lines[i];
      if (BLANK.test(line)) {
        blankBefore = true;
        body.push('');
        i += 1;
        continue;
      }
      const lead = line.length - line.trimStart().length;
      if (lead >= Math.min(width, indent + 2)) {
        body.push(line.slice(Math.min(lead, width)));
      } else if (!blankBefore && !sameKind(line) && !BULLET.test(line) && !ORDERED.test(line) && !FENCE.test(line) && !HEADING.test(line) && !QUOTE.test(line)) {
        body.push(line); // a lazy continuation of the item's paragraph
      } else {
        break;
      }
      blankBefore = false;
      i += 1;
    }
    while (body.length && body[body.length - 1] === '') body.pop();
    const li = node('li');
    if (depth >= MAX_BLOCK_DEPTH) {
      li.append(body.join('\n'));
    } else if (body.some((l) => BULLET.test(l) || ORDERED.test(l) || FENCE.test(l) || QUOTE.test(l) || BLANK.test(l))) {
      blocks(body, li, depth + 1);
      // A tight item (no blank line in it) shows its text without paragraph spacing.
      if (!body.some((l) => BLANK.test(l))) {
        for (const p of [...li.children]) if (p.tagName === 'P') p.replaceWith(...p.childNodes);
      }
    } else {
      inline(body.join('\n'), li, 0);
    }
    element.append(li);
    // A blank line then the next item keeps the list going.
    let next = i;
    while (next < lines.length && BLANK.test(lines[next])) next += 1;
    if (next > i && next < lines.length && sameKind(lines[next])) i = next;
  }
  parent.append(element);
  return i;
}

/** Where `needle` next occurs at or after `from` in `text`, remembered per needle. */
function finder(text) {
  const seen = new Map();
  return (needle, from) => {
    const known = seen.get(needle);
    if (known && from >= known.from && (known.at === -1 || known.at >= from)) return known.at;
    const at = text.indexOf(needle, from);
    seen.set(needle, { from, at });
    return at;
  };
}

const EMPHASIS = [
  ['**', 'strong'],
  ['__', 'strong'],
  ['~~', 'del'],
  ['*', 'em'],
  ['_', 'em'],
];

const WORD = /[\p{L}\p{N}]/u;

/** Appends the inline content of `text` to `parent`. */
function inline(text, parent, depth) {
  const find = finder(text);
  let plain = '';
  const emit = () => {
    if (plain) parent.append(plain);
    plain = '';
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === '\\' && i + 1 < text.length && /[!-/:-@[-`{-~]/.test(text[i + 1])) {
      plain += text[i + 1];
      i += 2;
      continue;
    }
    if (c === '\n') {
      emit();
      parent.append(node('br'));
      i += 1;
      continue;
    }
    if (c === '`') {
      let run = 1;
      while (text[i + run] === '`') run += 1;
      const ticks = '`'.repeat(run);
      let close = find(ticks, i + run);
      // The closing run must be exactly as long as the opening one (a few tries, then text).
      for (let tries = 0; close !== -1 && text[close + run] === '`'; tries += 1) {
        let end = close;
        while (text[end] === '`') end += 1;
        close = tries < MAX_TRIES ? text.indexOf(ticks, end) : -1;
      }
      if (close === -1) {
        plain += ticks;
        i += run;
        continue;
      }
      emit();
      const code = node('code');
      let inner = text.slice(i + run, close).replace(/\n/g, ' ');
      if (inner.length > 2 && inner.startsWith(' ') && inner.endsWith(' ') && inner.trim()) inner = inner.slice(1, -1);
      code.textContent = inner;
      parent.append(code);
      i = close + run;
      continue;
    }
    if (c === '[') {
      const link = linkAt(text, i, find);
      if (link) {
        emit();
        const a = node('a');
        a.href = link.href;
        a.rel = 'noopener noreferrer';
        a.target = '_blank';
        if (depth < MAX_INLINE_DEPTH) inline(link.label, a, depth + 1);
        else a.textContent = link.label;
        parent.append(a);
        i = link.end;
        continue;
      }
    }
    if (c === '*' || c === '_' || c === '~') {
      const hit = depth < MAX_INLINE_DEPTH ? emphasisAt(text, i, find) : null;
      if (hit) {
        emit();
        const span = node(hit.tag);
        inline(text.slice(hit.start, hit.end), span, depth + 1);
        parent.append(span);
        i = hit.end + hit.marker.length;
        continue;
      }
      // An unmatched run of delimiters is text, all of it.
      let run = 1;
      while (text[i + run] === c) run += 1;
      plain += text.slice(i, i + run);
      i += run;
      continue;
    }
    plain += c;
    i += 1;
  }
  emit();
}

/** Emphasis opening at `i`: {tag, marker, start, end} of its content, or null. */
function emphasisAt(text, i, find) {
  for (const [marker, tag] of EMPHASIS) {
    if (!text.startsWith(marker, i)) continue;
    const start = i + marker.length;
    const after = text[start];
    if (after === undefined || /\s/.test(after) || after === marker[0]) continue;
    // Underscores inside a word (snake_case) are not emphasis.
    if (marker[0] === '_' && i > 0 && WORD.test(text[i - 1])) continue;
    let close = find(marker, start);
    for (let tries = 0; close !== -1 && tries < MAX_TRIES; tries += 1) {
      const before = text[close - 1];
      const next = text[close + marker.length];
      const okBefore = !/\s/.test(before);
      const okAfter = marker[0] !== '_' || next === undefined || !WORD.test(next);
      // `*a **b** c*`: a single `*` must not close on half of a `**`.
      const okRun = marker.length === 2 || (next !== marker[0] && before !== marker[0]);
      if (close > start && okBefore && okAfter && okRun) return { tag, marker, start, end: close };
      close = text.indexOf(marker, close + 1);
    }
  }
  return null;
}

/** `[label](url)` at `i` with an http or https URL: {label, href, end}, or null. */
function linkAt(text, i, find) {
  const close = find('](', i + 1);
  // A label is short: a `[` far from the next `](` is text (and costs no copy of the stretch).
  if (close === -1 || close - i > 1024) return null;
  const label = text.slice(i + 1, close);
  if (!label || label.includes('\n') || label.includes('](')) return null;
  // The target ends at the `)` that balances the opening one (Wikipedia's `Foo_(bar)`),
  // looked for within a bounded stretch.
  let end = -1;
  let open = 0;
  for (let j = close + 2; j < text.length && j < close + 2 + 2048; j += 1) {
    if (text[j] === '(') open += 1;
    else if (text[j] === ')' && open-- === 0) {
      end = j;
      break;
    } else if (text[j] === '\n') break;
  }
  if (end === -1) return null;
  let target = text.slice(close + 2, end).trim();
  if (target.startsWith('<') && target.endsWith('>')) target = target.slice(1, -1);
  const href = safeHref(target);
  return href ? { label, href, end: end + 1 } : null;
}

/** The URL `target` names when it is an absolute http or https URL; null otherwise. */
export function safeHref(target) {
  if (!target || /\s/.test(target)) return null;
  let url;
  try {
    url = new URL(target);
  } catch {
    return null;
  }
  return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null;
}
