// Drawing: runs, cards and the timeline, built as DOM nodes. Everything that came from a
// model, a tool or a file is written with text nodes (never innerHTML), so a result holding
// markup is shown as the text it is; the model's text is laid out as Markdown by
// markdown.js, which builds its elements the same way.

import { renderMarkdown } from './markdown.js';

/** A new element; string children become text nodes. `attrs` names come from this file only. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === 'class') node.className = value;
    else if (name === 'data') Object.assign(node.dataset, value);
    else node.setAttribute(name, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
/** The most characters of one text shown before "show all". */
const CLIP = 20000;

/** `n` with its noun, singular for one: count(1, 'line') is "1 line", count(2, 'line') "2 lines". */
export function count(n, one, many = `${one}s`) {
  return `${n} ${n === 1 ? one : many}`;
}

export function ms(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return '';
  if (n < 1000) return `${Math.round(n)} ms`;
  return `${(n / 1000).toFixed(n < 10000 ? 2 : 1)} s`;
}

function bytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} kB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

export function time(msSinceEpoch) {
  return new Date(msSinceEpoch).toLocaleTimeString();
}

/** The text of a message's content (a string, or OpenAI-style parts). */
export function messageText(message) {
  if (!message) return '';
  const content = message.content;
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((part) => (typeof part === 'string' ? part : part.text || `[${part.type}]`)).join('');
  }
  return '';
}

function pretty(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text ?? '';
  }
}

/** A `<pre>` of `text`, clipped with a button to show the rest. */
function pre(text, cls) {
  const node = el('pre', { class: cls });
  if (text.length <= CLIP) {
    node.textContent = text;
    return node;
  }
  node.textContent = text.slice(0, CLIP);
  const more = el('button', { type: 'button', class: 'more' }, `show all (${count(text.length, 'character')})`);
  more.addEventListener('click', () => {
    node.textContent = text;
  });
  return el('div', {}, node, more);
}

/** The model's text as Markdown; text too long to lay out is shown as it is, clipped. */
function modelText(text) {
  return text.length <= CLIP ? renderMarkdown(text) : pre(text, 'text');
}

function looksLikeDiff(lines) {
  return lines.some((l) => l.startsWith('@@ ')) && lines.some((l) => l.startsWith('+++ ') || l.startsWith('--- '));
}

/** A unified diff, one line element each, classed by kind. */
function diff(text) {
  const node = el('pre', { class: 'diff' });
  for (const line of text.split('\n')) {
    let cls = 'ctx';
    if (line.startsWith('+++ ') || line.startsWith('--- ')) cls = 'meta';
    else if (line.startsWith('@@')) cls = 'hunk';
    else if (line.startsWith('+')) cls = 'add';
    else if (line.startsWith('-')) cls = 'del';
    node.append(el('span', { class: `line ${cls}` }, line || ' '));
  }
  return node;
}

/** Keeps `<details>` open across redraws, by key. */
const opened = new Set();
function details(key, summary, body, openByDefault = false) {
  const node = el('details', { class: 'more-info' }, el('summary', {}, summary), body);
  node.open = opened.has(key) || (openByDefault && !opened.has(`closed:${key}`));
  node.addEventListener('toggle', () => {
    if (node.open) {
      opened.add(key);
      opened.delete(`closed:${key}`);
    } else {
      opened.delete(key);
      opened.add(`closed:${key}`);
    }
  });
  return node;
}

/**
 * A tool call's card: `call` is {name, call_id, arguments} (or null when only the result is
 * known), `result` the agent's ToolResult (or null while it runs), `live` {progress} or null.
 */
export function toolCard(call, result, live) {
  const name = (call && call.name) || (result && result.name) || '?';
  const callId = (call && call.call_id) || (result && result.call_id) || '';
  const state = !result ? 'running' : result.is_error ? 'error' : 'ok';
  const card = el('section', { class: `card tool ${state}`, data: { callId, tool: name } });
  card.append(
    el(
      'div',
      { class: 'card-head' },
      el('span', { class: 'kind' }, 'tool'),
      el('span', { class: 'tool-name' }, name),
      el('span', { class: `badge ${state}` }, state === 'running' ? 'running…' : state),
      result ? el('span', { class: 'duration' }, ms(result.duration_ms)) : null,
      callId ? el('span', { class: 'id' }, callId) : null,
    ),
  );
  if (call && call.arguments !== undefined) {
    card.append(details(`args:${callId}:${name}`, 'arguments', pre(pretty(call.arguments), 'args'), true));
  }
  if (result && result.repaired_arguments) {
    card.append(el('p', { class: 'note' }, 'arguments repaired to: ', el('code', {}, result.repaired_arguments)));
  }
  if (!result) {
    if (live && live.progress) card.append(el('p', { class: 'progress' }, live.progress));
    if (live && live.chunks) card.append(pre(live.chunks, 'result partial'));
    return card;
  }
  if (result.silent) card.append(el('p', { class: 'note' }, 'silent: meant for the model, not shown to users'));
  const shown = result.user_text ?? result.content ?? '';
  if (result.is_error) {
    card.append(pre(shown, 'tool-error'));
  } else {
    const lines = shown.split('\n');
    if (name === 'Edit' || looksLikeDiff(lines)) card.append(diff(shown));
    else card.append(pre(shown, 'result'));
  }
  for (const block of result.blocks || []) {
    if (block.type === 'image' && IMAGE_TYPES.has(block.mime_type) && BASE64.test(block.data || '')) {
      card.append(el('img', { class: 'tool-image', alt: `image from ${name}`, src: `data:${block.mime_type};base64,${block.data}` }));
    } else if (block.type === 'image') {
      card.append(el('p', { class: 'note' }, `an image of an unsupported type (${block.mime_type}) is not shown`));
    } else if (block.type !== 'text') {
      card.append(el('p', { class: 'note' }, `a ${block.type} block`));
    }
  }
  if (result.user_text !== undefined && result.user_text !== null && result.user_text !== result.content) {
    card.append(details(`llm:${callId}:${name}`, 'sent to the model', pre(result.content || '', 'result')));
  }
  return card;
}

/** The invocations of a run as a nested list. */
function tree(run) {
  const children = new Map();
  for (const inv of run.invocations.values()) {
    const key = inv.parent && run.invocations.has(inv.parent) ? inv.parent : null;
    if (!children.has(key)) children.set(key, []);
    children.get(key).push(inv);
  }
  const list = (parent, depth) => {
    const items = children.get(parent) || [];
    if (items.length === 0 || depth > 32) return null;
    return el(
      'ul',
      { class: 'tree' },
      items.map((inv) =>
        el(
          'li',
          {},
          el('span', { class: 'agent' }, inv.author),
          ' ',
          el('span', { class: 'id' }, inv.id),
          inv.toolCallId ? el('span', { class: 'note' }, ` (as tool call ${inv.toolCallId})`) : null,
          list(inv.id, depth + 1),
        ),
      ),
    );
  };
  return list(null, 0);
}

/**
 * A graph run's path: each node in the order it started, with its super-step and how it
 * went (running, ended, asking a person, failed); null for a run of no graph.
 */
function graphPath(events) {
  const steps = [];
  const at = new Map();
  for (const e of events) {
    const key = `${e.step}\u0000${e.node}`;
    if (e.type === 'node_started') {
      at.set(key, steps.length);
      steps.push({ node: e.node, step: e.step, state: 'running' });
    } else if (e.type === 'node_ended' && at.has(key)) {
      steps[at.get(key)].state = 'ok';
    } else if (e.type === 'interrupted') {
      const asking = steps.findLast((s) => s.node === e.node && s.state === 'running');
      if (asking) asking.state = 'asking';
    } else if (e.type === 'error') {
      for (const s of steps) if (s.state === 'running') s.state = 'error';
    }
  }
  if (steps.length === 0) return null;
  const labels = { running: 'running…', ok: 'ended', asking: 'asks a person', error: 'failed' };
  return el(
    'ol',
    { class: 'graph-path' },
    steps.map((s) =>
      el(
        'li',
        { class: `graph-node ${s.state}`, data: { node: s.node, step: String(s.step), state: s.state }, title: `step ${s.step}: ${s.node} ${labels[s.state]}` },
        el('span', { class: 'step' }, String(s.step)),
        el('span', { class: 'node-name' }, s.node),
      ),
    ),
  );
}

/**
 * The ids of the answers graphs sent: the model_response a graph writes after its last node
 * ended (its state's last message), told apart from a node's own model calls, which come
 * between a node's start and end.
 */
function graphAnswers(events) {
  const open = new Map();
  const graphs = new Set();
  const answers = new Set();
  for (const e of events) {
    const inv = e.invocation_id;
    if (e.type === 'node_started') {
      graphs.add(inv);
      open.set(inv, (open.get(inv) || 0) + 1);
    } else if (e.type === 'node_ended') {
      open.set(inv, Math.max((open.get(inv) || 0) - 1, 0));
    } else if (e.type === 'model_response' && graphs.has(inv) && !open.get(inv) && !(e.message.tool_calls || []).length) {
      answers.add(e.id);
    }
  }
  return answers;
}

/** Bars for each model and tool call on one time axis. */
function timeline(spans) {
  if (spans.length === 0) return null;
  const start = Math.min(...spans.map((s) => s.start));
  const end = Math.max(...spans.map((s) => s.end), start + 1);
  const total = end - start;
  const rows = spans.map((s) => {
    const bar = el('div', { class: `bar ${s.kind}${s.error ? ' error' : ''}`, title: `${s.label}: ${ms(s.end - s.start)}` });
    bar.style.left = `${((s.start - start) / total) * 100}%`;
    bar.style.width = `${Math.max(((s.end - s.start) / total) * 100, 0.5)}%`;
    return el(
      'div',
      { class: 'tl-row' },
      el('span', { class: 'tl-label' }, s.label),
      el('div', { class: 'tl-track' }, bar),
      el('span', { class: 'tl-time' }, ms(s.end - s.start)),
    );
  });
  return el('div', { class: 'timeline' }, el('div', { class: 'tl-total' }, `timeline: ${ms(total)}`), rows);
}

/**
 * A run's section. `run` = {root, events, invocations, live, sentBefore}; `sentBefore` maps a
 * model_response's id to the bytes of conversation before it.
 */
/**
 * A call a run paused on: what the permission rules asked about and why, the change it makes,
 * and (while it waits, on a page that can resume the session) the buttons that decide it.
 * `decide(callId, decision)` posts the decision; `settled` says it was decided already.
 */
function approvalCard(e, settled, decide) {
  const card = el('section', { class: `card approval ${settled ? 'settled' : 'waiting'}`, data: { callId: e.call_id, tool: e.name } });
  card.append(
    el(
      'div',
      { class: 'card-head' },
      el('span', { class: 'kind' }, 'approval'),
      el('span', { class: 'tool-name' }, e.name),
      el('span', { class: `badge ${settled ? 'ok' : 'running'}` }, settled ? 'decided' : 'awaits your decision'),
      el('span', { class: 'id' }, e.call_id),
    ),
    el('p', { class: 'reason' }, 'asked because ', e.reason),
    details(`approval-args:${e.call_id}`, 'arguments', pre(pretty(e.arguments), 'args'), true),
  );
  if (e.preview) card.append(e.preview.startsWith('$ ') ? pre(e.preview, 'command') : diff(e.preview));
  if (settled || !decide) return card;
  const why = el('input', { class: 'deny-message', type: 'text', placeholder: 'why not (told to the model)', maxlength: '2000' });
  const approve = el('button', { type: 'button', class: 'approve' }, 'Approve');
  const always = el('button', { type: 'button', class: 'always', title: 'approve, and allow calls like this one from now on (written to .toolbelt/settings.json)' }, 'Always');
  const deny = el('button', { type: 'button', class: 'deny' }, 'Deny');
  const pressed = (decision) => {
    for (const button of [approve, always, deny]) button.disabled = true;
    decide(e.call_id, decision);
  };
  approve.addEventListener('click', () => pressed({ decision: 'approve' }));
  always.addEventListener('click', () => pressed({ decision: 'approve', always: true }));
  deny.addEventListener('click', () => pressed({ decision: 'deny', message: why.value.trim() || undefined }));
  card.append(el('div', { class: 'decide' }, approve, always, deny, why));
  return card;
}

/** What a person decided about a paused call. */
function decidedCard(e) {
  const d = e.decision || {};
  const what = d.decision === 'deny' ? 'denied' : d.decision === 'edit' ? 'approved with edited arguments' : 'approved';
  const card = el('section', { class: `card decided ${d.decision === 'deny' ? 'error' : 'ok'}`, data: { callId: e.call_id } });
  card.append(el('div', { class: 'card-head' }, el('span', { class: 'kind' }, 'decision'), el('span', { class: 'tool-name' }, e.name), el('span', { class: 'badge' }, what), el('span', { class: 'id' }, e.call_id)));
  if (d.message) card.append(pre(d.message, 'text'));
  return card;
}

/**
 * A run's cards. `session` (optional): `settled` the session's call ids that were decided or
 * answered (in any run), and `decide(callId, decision)` when this page can resume the session.
 */
export function runView(run, session = {}) {
  const settled = session.settled || new Set();
  const questions = session.questions || new Set();
  const section = el('article', { class: 'run', data: { invocation: run.root } });
  const first = run.events[0];
  const done = run.events.some((e) => e.type === 'run_completed' && e.invocation_id === run.root);
  section.append(
    el(
      'div',
      { class: 'run-head' },
      el('h3', {}, `Run ${first ? time(first.timestamp_ms) : ''}`),
      el('span', { class: `badge ${done ? 'ok' : 'running'}` }, done ? 'completed' : 'running…'),
    ),
  );
  const invTree = tree(run);
  if (invTree && run.invocations.size > 1) section.append(details(`tree:${run.root}`, 'invocations', invTree, true));
  const path = graphPath(run.events);
  if (path) section.append(details(`graph:${run.root}`, 'graph path', path, true));

  // Cards in event order; a model call's tool cards follow it and fill in as results come.
  const cards = el('div', { class: 'cards' });
  const toolCards = new Map();
  const calls = new Map();
  const results = new Map();
  const lastAt = new Map();
  const spans = [];
  let modelCalls = 0;
  const asked = new Set();
  for (const e of run.events) {
    if (e.type === 'tool_result') results.set(e.result.call_id, e);
    if (e.type === 'approval_requested') asked.add(e.call_id);
  }
  const answers = graphAnswers(run.events);
  // A graph's nodes running now, per invocation: a model call made while one node runs is
  // that node's, and its card says so.
  const running = new Map();
  // The texts the model's cards of this run show, so a node's output repeats none of them.
  const shownTexts = new Set();
  // The card of the last text the model wrote, which a graph's answer may repeat.
  let lastText = null;
  for (const e of run.events) {
    const before = lastAt.get(e.invocation_id);
    if (e.type === 'node_started') running.set(e.invocation_id, [...(running.get(e.invocation_id) || []), e.node]);
    if (e.type === 'node_ended') running.set(e.invocation_id, (running.get(e.invocation_id) || []).filter((n) => n !== e.node));
    const nodes = running.get(e.invocation_id) || [];
    switch (e.type) {
      case 'user_input':
        cards.append(
          el(
            'section',
            { class: 'card user' },
            el('div', { class: 'card-head' }, el('span', { class: 'kind' }, e.message.role || 'user'), el('span', { class: 'id' }, time(e.timestamp_ms))),
            pre(messageText(e.message), 'text'),
          ),
        );
        break;
      case 'tool_input':
        for (const r of e.results) cards.append(toolCard(null, r, null));
        break;
      case 'model_response': {
        if (answers.has(e.id)) {
          // A graph's answer is the last message of its state, most often the text a node's
          // model call (or agent) wrote just before: that card is marked as the answer
          // instead of the text being shown twice. An answer of its own gets its own card.
          const text = messageText(e.message);
          if (lastText && lastText.text === text) {
            lastText.card.classList.add('answer');
            lastText.card.querySelector('.card-head').append(el('span', { class: 'badge ok answer-mark', title: `the answer of ${e.author}` }, 'answer'));
          } else if (text) {
            cards.append(
              el('section', { class: 'card graph-answer answer', data: { event: e.id } }, el('div', { class: 'card-head' }, el('span', { class: 'kind' }, 'answer'), el('span', { class: 'agent' }, e.author)), modelText(text)),
            );
          }
          lastText = null;
          break;
        }
        modelCalls += 1;
        const latency = before === undefined ? null : e.timestamp_ms - before;
        const usage = e.usage;
        const sent = run.sentBefore.get(e.id);
        const head = el(
          'div',
          { class: 'card-head' },
          el('span', { class: 'kind' }, 'model'),
          el('span', { class: 'agent' }, e.author),
          nodes.length === 1 ? el('span', { class: 'node', data: { node: nodes[0] } }, `node ${nodes[0]}`) : null,
          el('span', { class: 'stat' }, `call ${modelCalls}`),
          latency !== null ? el('span', { class: 'stat latency' }, ms(latency)) : null,
          usage ? el('span', { class: 'stat tokens' }, `tokens: ${usage.prompt_tokens} in / ${usage.completion_tokens} out`) : null,
          sent !== undefined ? el('span', { class: 'stat', title: 'the conversation sent, without the instruction and tool schemas' }, `≈ ${bytes(sent)} sent`) : null,
          e.finish_reason ? el('span', { class: 'stat' }, e.finish_reason) : null,
        );
        const text = messageText(e.message);
        const card = el('section', { class: 'card model', data: { event: e.id } }, head, text ? modelText(text) : null);
        const toolCalls = e.message.tool_calls || [];
        if (toolCalls.length) {
          card.append(el('p', { class: 'calls' }, 'asks for: ', toolCalls.map((c, i) => [i ? ', ' : '', el('code', {}, c.function.name)])));
        }
        cards.append(card);
        if (text) shownTexts.add(text);
        if (text && toolCalls.length === 0) lastText = { text, card };
        if (latency !== null) spans.push({ kind: 'model', label: `model ${modelCalls}`, start: before, end: e.timestamp_ms });
        for (const c of toolCalls) {
          // A paused call is shown by its approval card, and its result in the run that
          // resumed it.
          if (asked.has(c.id) && !results.has(c.id)) continue;
          const call = { name: c.function.name, call_id: c.id, arguments: c.function.arguments };
          calls.set(c.id, call);
          const result = results.get(c.id);
          const tool = toolCard(call, result ? result.result : null, run.live.tools.get(c.id));
          toolCards.set(c.id, tool);
          cards.append(tool);
        }
        break;
      }
      case 'tool_result': {
        const r = e.result;
        spans.push({ kind: 'tool', label: r.name, start: e.timestamp_ms - (r.duration_ms || 0), end: e.timestamp_ms, error: r.is_error });
        if (!toolCards.has(r.call_id)) cards.append(toolCard(null, r, null));
        break;
      }
      case 'approval_requested':
        cards.append(approvalCard(e, settled.has(e.call_id), session.decide));
        break;
      case 'approval_decided':
        cards.append(decidedCard(e));
        break;
      case 'pending_tool_calls':
        cards.append(
          el(
            'section',
            { class: 'card pending' },
            el('div', { class: 'card-head' }, el('span', { class: 'kind' }, 'handed back')),
            el('p', {}, 'calls for the caller to run: ', e.calls.map((c, i) => [i ? ', ' : '', el('code', {}, c.function.name)])),
          ),
        );
        break;
      case 'node_ended': {
        // What a node wrote that no card shows: an agent node's answer (its own run's events
        // are shown live, not stored), or a function node's message. The questions of ask
        // nodes are shown by their question cards.
        const messages = (e.update && Array.isArray(e.update.messages) && e.update.messages) || [];
        for (const m of messages) {
          const text = m && m.role === 'assistant' && !(m.tool_calls || []).length ? messageText(m) : '';
          if (!text || shownTexts.has(text) || questions.has(text)) continue;
          const card = el(
            'section',
            { class: 'card node-output', data: { node: e.node } },
            el('div', { class: 'card-head' }, el('span', { class: 'kind' }, 'node'), el('span', { class: 'node', data: { node: e.node } }, e.node), el('span', { class: 'stat' }, `step ${e.step}`)),
            modelText(text),
          );
          cards.append(card);
          shownTexts.add(text);
          lastText = { text, card };
        }
        break;
      }
      case 'interrupted': {
        const question = typeof e.question === 'string' ? e.question : JSON.stringify(e.question);
        cards.append(
          el(
            'section',
            { class: 'card asking', data: { node: e.node } },
            el('div', { class: 'card-head' }, el('span', { class: 'kind' }, 'question'), el('span', { class: 'tool-name' }, e.node), el('span', { class: 'badge running' }, 'awaits your answer')),
            pre(question, 'text'),
            el('p', { class: 'note' }, 'your next message in this session is the answer'),
          ),
        );
        break;
      }
      case 'warning':
        cards.append(el('section', { class: 'card warning' }, el('div', { class: 'card-head' }, el('span', { class: 'kind' }, 'warning')), pre(e.message, 'text')));
        break;
      case 'error':
        cards.append(
          el('section', { class: 'card run-error' }, el('div', { class: 'card-head' }, el('span', { class: 'kind' }, `error: ${e.kind}`)), pre(e.message, 'text')),
        );
        break;
      case 'run_completed':
        if (e.invocation_id === run.root) cards.append(el('p', { class: 'completed' }, `run completed at ${time(e.timestamp_ms)}`));
        break;
      default:
        break;
    }
    lastAt.set(e.invocation_id, e.timestamp_ms);
  }
  for (const [invocation, text] of run.live.text) {
    if (text) {
      cards.append(
        el('section', { class: 'card model streaming', data: { invocation } }, el('div', { class: 'card-head' }, el('span', { class: 'kind' }, 'model'), el('span', { class: 'badge running' }, 'streaming…')), modelText(text)),
      );
    }
  }
  const line = timeline(spans);
  if (line) section.append(details(`timeline:${run.root}`, 'timeline', line, true));
  section.append(cards);
  return section;
}

const PLAN_STATUSES = new Set(['pending', 'in_progress', 'completed']);

/**
 * The session's plan: the task list of the last TodoWrite call that succeeded, read from the
 * call's own arguments (what the tool saved), or null when the session has none.
 */
export function latestPlan(events) {
  const args = new Map();
  let plan = null;
  for (const e of events) {
    if (e.type === 'model_response') {
      for (const c of (e.message && e.message.tool_calls) || []) {
        if (c.function && c.function.name === 'TodoWrite') args.set(c.id, c.function.arguments);
      }
    } else if (e.type === 'tool_result' && e.result.name === 'TodoWrite' && !e.result.is_error && args.has(e.result.call_id)) {
      try {
        const todos = JSON.parse(args.get(e.result.call_id)).todos;
        if (Array.isArray(todos)) plan = todos.filter((t) => t && typeof t.content === 'string' && PLAN_STATUSES.has(t.status));
      } catch {
        // Arguments the tool accepted after repair: the card shows them; the panel keeps the last plan it could read.
      }
    }
  }
  return plan;
}

/** The plan panel's contents: one line per task, its status as a mark and a class. */
export function planView(todos) {
  const done = todos.filter((t) => t.status === 'completed').length;
  const marks = { pending: '☐', in_progress: '▶', completed: '☑' };
  return [
    el('div', { class: 'plan-head' }, el('span', { class: 'kind' }, 'plan'), el('span', { class: 'stat' }, `${done} of ${todos.length} done`)),
    el(
      'ol',
      { class: 'plan-items' },
      todos.map((t) =>
        el(
          'li',
          { class: `todo ${t.status}`, data: { status: t.status } },
          el('span', { class: 'mark', 'aria-hidden': 'true' }, marks[t.status]),
          // While a task is being done its activeForm says so ("Running the tests").
          el('span', { class: 'todo-text' }, t.status === 'in_progress' && typeof t.activeForm === 'string' && t.activeForm ? t.activeForm : t.content),
        ),
      ),
    ),
  ];
}
