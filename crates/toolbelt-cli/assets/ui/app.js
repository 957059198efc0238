// State and wiring: the sessions list, the selected session's runs, the event stream and the
// chat box. Drawing is in view.js.

import { count, el, latestPlan, messageText, planView, runView, time, toolCard } from './view.js';

const $ = (id) => document.getElementById(id);
const keyOf = (app, user, session) => `${app}\u0000${user}\u0000${session}`;

const state = {
  config: null,
  lastSeq: 0,
  /** key → {app, user_id, session_id, title, updated_ms, events (count), loaded, list, ids, live} */
  sessions: new Map(),
  selected: null,
  /** Sessions with a run started from this page still going. */
  running: new Set(),
  /** Sessions whose run ended before the answer to its start arrived (a fast run). */
  endedEarly: new Set(),
  /** serve mode: call number → {call, result, live} */
  calls: new Map(),
  /** The session the run pane showed when last drawn (a newly chosen one opens at its end). */
  drawnSession: null,
  /** session key → decisions taken on its paused calls and not yet sent: call id → decision */
  decisions: new Map(),
};

function setStatus(text, cls) {
  const node = $('status');
  node.textContent = text;
  node.className = `status ${cls || ''}`;
}

async function api(path, options) {
  const response = await fetch(path, { credentials: 'same-origin', ...options });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || `${response.status} ${response.statusText}`);
  return body;
}

function session(app, user, id) {
  const key = keyOf(app, user, id);
  let s = state.sessions.get(key);
  if (!s) {
    s = { key, app, user_id: user, session_id: id, title: null, updated_ms: Date.now(), events: 0, loaded: false, list: [], ids: new Set(), live: { text: new Map(), tools: new Map() } };
    state.sessions.set(key, s);
  }
  return s;
}

function addEvent(s, event) {
  if (s.ids.has(event.id)) return false;
  s.ids.add(event.id);
  s.list.push(event);
  return true;
}

// ---- drawing ----

let drawPending = false;
function redraw() {
  if (drawPending) return;
  drawPending = true;
  requestAnimationFrame(() => {
    drawPending = false;
    drawSessions();
    drawMain();
  });
}

function drawSessions() {
  const list = $('sessions');
  const sorted = [...state.sessions.values()].sort((a, b) => b.updated_ms - a.updated_ms);
  list.replaceChildren(
    ...sorted.map((s) => {
      const mine = state.config && s.app === state.config.app && s.user_id === state.config.user_id;
      const button = el(
        'button',
        { type: 'button', class: `session${s.key === state.selected ? ' selected' : ''}`, data: { session: s.session_id } },
        s.title ? el('span', { class: 'session-title' }, s.title) : null,
        el('span', { class: 'session-id' }, s.session_id),
        el('span', { class: 'session-meta' }, `${count(s.events, 'event')} · ${time(s.updated_ms)}`, mine || !state.config.app ? '' : ` · ${s.app}/${s.user_id}`),
        state.running.has(s.session_id) && mine ? el('span', { class: 'badge running' }, 'running') : null,
      );
      button.addEventListener('click', () => select(s.key));
      return el('li', {}, button);
    }),
  );
}

/** Groups a session's events into runs: each root invocation with its children. */
function runsOf(s) {
  const parent = new Map();
  const invocations = new Map();
  for (const e of s.list) {
    if (!invocations.has(e.invocation_id)) {
      invocations.set(e.invocation_id, { id: e.invocation_id, author: e.author === 'user' ? '' : e.author, parent: e.parent_invocation_id || null, toolCallId: e.tool_call_id || null });
      parent.set(e.invocation_id, e.parent_invocation_id || null);
    }
    const inv = invocations.get(e.invocation_id);
    if (!inv.author && e.author !== 'user') inv.author = e.author;
  }
  const rootOf = (id) => {
    let current = id;
    for (let i = 0; i < 64; i += 1) {
      const up = parent.get(current);
      if (!up || !parent.has(up)) return current;
      current = up;
    }
    return current;
  };
  const runs = new Map();
  let sent = 0;
  const sentBefore = new Map();
  for (const e of s.list) {
    const root = rootOf(e.invocation_id);
    if (!runs.has(root)) runs.set(root, { root, events: [], invocations: new Map(), live: s.live, sentBefore });
    const run = runs.get(root);
    run.events.push(e);
    run.invocations.set(e.invocation_id, invocations.get(e.invocation_id));
    // What the next model call is sent, roughly: the conversation so far.
    if (e.type === 'model_response') sentBefore.set(e.id, sent);
    if (e.type === 'user_input' || e.type === 'model_response') sent += JSON.stringify(e.message).length;
    if (e.type === 'tool_result') sent += (e.result.content || '').length;
    if (e.type === 'tool_input') for (const r of e.results) sent += (r.content || '').length;
  }
  for (const run of runs.values()) {
    for (const inv of run.invocations.values()) if (!inv.author) inv.author = 'user';
  }
  // A run shows the text streaming in its own invocations; text of an invocation no stored
  // event names yet belongs to the newest run. (The session's live text is one map.)
  const all = [...runs.values()];
  const known = new Set(all.flatMap((run) => [...run.invocations.keys()]));
  all.forEach((run, i) => {
    const text = new Map();
    for (const [inv, t] of s.live.text) {
      if (run.invocations.has(inv) || (!known.has(inv) && i === all.length - 1)) text.set(inv, t);
    }
    run.live = { text, tools: s.live.tools };
  });
  return all;
}

function drawMain() {
  const runs = $('runs');
  if (state.config && state.config.mode === 'serve') {
    const cards = [...state.calls.values()].reverse().map((c) => toolCard(c.call, c.result, null));
    runs.replaceChildren(...(cards.length ? cards : [el('p', { class: 'empty' }, 'No tool calls yet: they appear here as MCP clients make them.')]));
    return;
  }
  const s = state.sessions.get(state.selected);
  $('title').textContent = s ? `Session ${s.session_id}` : state.sessions.size ? 'Choose a session' : 'No sessions yet';
  if (!s) {
    drawPlan(null);
    runs.replaceChildren(el('p', { class: 'empty' }, state.config && state.config.chat ? 'Runs appear here as they happen. Ask something below to start one.' : 'Runs appear here as they happen (`toolbelt run --session FILE`).'));
    drawChat();
    return;
  }
  // A pane scrolled to its end follows what comes; one scrolled up stays where it is.
  const pane = $('run-pane');
  // A session just chosen opens at its newest run.
  const atBottom = state.drawnSession !== s.key || pane.scrollTop + pane.clientHeight >= pane.scrollHeight - 40;
  state.drawnSession = s.key;
  drawPlan(s);
  const view = { settled: settledCalls(s), questions: questionsOf(s), decide: mineToResume(s) ? (callId, decision) => decide(s, callId, decision) : null };
  runs.replaceChildren(...runsOf(s).map((run) => runView(run, view)));
  if (atBottom) pane.scrollTop = pane.scrollHeight;
  drawChat();
}

/** The selected session's plan (its last TodoWrite list), above its runs; hidden without one. */
function drawPlan(s) {
  const panel = $('plan');
  const todos = s ? latestPlan(s.list) : null;
  panel.hidden = !todos || todos.length === 0;
  panel.replaceChildren(...(panel.hidden ? [] : planView(todos)));
}

function drawChat() {
  const c = state.config;
  if (!c) return;
  const s = state.sessions.get(state.selected);
  const mine = s && s.app === c.app && s.user_id === c.user_id;
  const busy = mine && state.running.has(s.session_id);
  $('send').disabled = !c.chat || busy;
  $('message').disabled = !c.chat;
  if (!c.chat) $('chat-note').textContent = `The chat box is off: ${c.chat_off || 'no model configured'}`;
  else if (s && !mine) $('chat-note').textContent = 'This session belongs to another application: the message starts a new session.';
  else if (busy) $('chat-note').textContent = 'A run of this session is going.';
  else if (!s) $('chat-note').textContent = 'The message starts a new session.';
  else $('chat-note').textContent = '';
}

// ---- approvals ----

/** The session's calls that were decided or answered: no button shows for them. */
function settledCalls(s) {
  const settled = new Set();
  for (const e of s.list) {
    if (e.type === 'approval_decided') settled.add(e.call_id);
    else if (e.type === 'tool_result') settled.add(e.result.call_id);
    else if (e.type === 'tool_input') for (const r of e.results) settled.add(r.call_id);
  }
  return settled;
}

/** The questions the session's graphs asked (their cards show them once). */
function questionsOf(s) {
  return new Set(s.list.filter((e) => e.type === 'interrupted' && typeof e.question === 'string').map((e) => e.question));
}

/** Whether this page can resume `s`: its own application and user, and a model to run. */
function mineToResume(s) {
  const c = state.config;
  return Boolean(c && c.chat && s.app === c.app && s.user_id === c.user_id && !state.running.has(s.session_id));
}

/**
 * Takes a person's decision on a paused call; once every waiting call of the session is
 * decided, resumes the session with all of them (a resume answers an undecided call "not
 * approved", so one click must not resume a turn that paused on two calls).
 */
async function decide(s, callId, decision) {
  const taken = state.decisions.get(s.key) || new Map();
  taken.set(callId, decision);
  state.decisions.set(s.key, taken);
  const settled = settledCalls(s);
  const waiting = s.list.filter((e) => e.type === 'approval_requested' && !settled.has(e.call_id)).map((e) => e.call_id);
  if (!waiting.every((id) => taken.has(id))) {
    $('chat-note').textContent = `Decided ${taken.size} of ${count(waiting.length, 'paused call')}; the run resumes when all are decided.`;
    return;
  }
  state.decisions.delete(s.key);
  // "Always" is an approval plus the rules that allow such calls from now on.
  const decisions = {};
  const always = [];
  for (const [id, d] of taken) {
    const { always: remember, ...plain } = d;
    decisions[id] = plain;
    if (remember) always.push(id);
  }
  try {
    await api('/api/decisions', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ session_id: s.session_id, decisions, always }),
    });
    if (!state.endedEarly.delete(s.session_id)) state.running.add(s.session_id);
    $('chat-note').textContent = '';
  } catch (error) {
    $('chat-note').textContent = `Not resumed: ${error.message}`;
  }
  redraw();
}

// ---- data ----

/** Takes a session's stored events, keeping any newer ones the stream brought first. */
function loaded(s, events) {
  const newer = s.list;
  s.list = [];
  s.ids = new Set();
  for (const e of events) addEvent(s, e);
  for (const e of newer) addEvent(s, e);
  s.events = Math.max(s.events, s.list.length);
  s.loaded = true;
}

async function select(key) {
  state.selected = key;
  const s = state.sessions.get(key);
  redraw();
  if (!s || s.loaded) return;
  s.loaded = true;
  try {
    const q = new URLSearchParams({ app: s.app, user: s.user_id, session: s.session_id });
    const body = await api(`/api/events?${q}`);
    loaded(s, body.events);
  } catch (error) {
    s.loaded = false;
    setStatus(`cannot load the session: ${error.message}`, 'bad');
  }
  redraw();
}

function onItem(item) {
  switch (item.kind) {
    case 'stored': {
      state.lastSeq = Math.max(state.lastSeq, item.seq);
      const s = session(item.app, item.user_id, item.session_id);
      s.updated_ms = Math.max(s.updated_ms, item.event.timestamp_ms);
      if (addEvent(s, item.event)) s.events += 1;
      // A new session's title (its first prompt) is derived by the server: asked for again.
      if (!s.title && item.event.type === 'user_input') refreshTitles();
      if (item.event.type === 'model_response') s.live.text.delete(item.event.invocation_id);
      if (item.event.type === 'tool_result') s.live.tools.delete(item.event.result.call_id);
      // A page with nothing selected follows the first session that shows activity.
      if (!state.selected) {
        state.selected = s.key;
        s.loaded = true;
      }
      break;
    }
    case 'live': {
      const c = state.config;
      const s = session(c.app, c.user_id, item.session_id);
      const e = item.event;
      if (e.type === 'model_delta') {
        s.live.text.set(e.invocation_id, (s.live.text.get(e.invocation_id) || '') + (e.delta.content || ''));
      } else if (e.type === 'tool_progress') {
        const live = s.live.tools.get(e.call_id) || {};
        const u = e.update;
        live.progress = [u.message, u.total ? `${u.progress} of ${u.total}` : u.progress].filter((x) => x !== undefined && x !== null && x !== '').join(' · ');
        s.live.tools.set(e.call_id, live);
      } else if (e.type !== 'tool_chunk') {
        // Forwarded from an agent run as a tool: shown in its run, never stored.
        addEvent(s, e);
        if (e.type === 'model_response') s.live.text.delete(e.invocation_id);
      } else {
        const live = s.live.tools.get(e.call_id) || {};
        const content = e.chunk && e.chunk.content;
        const text = content && typeof content.value === 'string' ? content.value : JSON.stringify(content);
        live.chunks = `${live.chunks || ''}${text}`;
        s.live.tools.set(e.call_id, live);
      }
      break;
    }
    case 'run_ended':
      if (!state.running.delete(item.session_id)) state.endedEarly.add(item.session_id);
      break;
    case 'call_start':
      state.calls.set(item.id, { call: { name: item.name, call_id: item.call_id, arguments: item.arguments }, result: null });
      break;
    case 'call_end': {
      const c = state.calls.get(item.id) || { call: null };
      c.result = item.result;
      state.calls.set(item.id, c);
      break;
    }
    default:
      break;
  }
  redraw();
}

let source = null;
function connect() {
  if (source) source.close();
  source = new EventSource(`/api/stream?after=${state.lastSeq}`);
  source.onopen = () => setStatus('live', 'good');
  source.onmessage = (message) => {
    try {
      onItem(JSON.parse(message.data));
    } catch (error) {
      setStatus(`bad event: ${error.message}`, 'bad');
    }
  };
  source.onerror = () => {
    // Reconnect from the last stored event seen (the browser's own retry would replay from
    // where the stream first started).
    setStatus('reconnecting…', 'bad');
    source.close();
    setTimeout(connect, 1000);
  };
}

async function send(event) {
  event.preventDefault();
  const text = $('message').value;
  if (!text.trim()) return;
  const c = state.config;
  const s = state.sessions.get(state.selected);
  const sessionId = s && s.app === c.app && s.user_id === c.user_id ? s.session_id : null;
  $('send').disabled = true;
  try {
    const body = await api('/api/runs', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ message: text, session_id: sessionId }),
    });
    $('message').value = '';
    // One run per session at a time (the server refuses a second), so an early end is this run's.
    if (!state.endedEarly.delete(body.session_id)) state.running.add(body.session_id);
    const started = session(c.app, c.user_id, body.session_id);
    started.loaded = true;
    state.selected = started.key;
  } catch (error) {
    $('chat-note').textContent = `Not started: ${error.message}`;
    $('send').disabled = false;
    return;
  }
  redraw();
}

/** Takes the sessions' titles (and counts) from the server again, at most one request at a time. */
let titlesPending = false;
async function refreshTitles() {
  if (titlesPending) return;
  titlesPending = true;
  try {
    const body = await api('/api/sessions');
    for (const s of body.sessions) session(s.app, s.user_id, s.session_id).title = s.title;
    redraw();
  } catch (error) {
    // The list still works without titles; the next prompt asks again.
  } finally {
    titlesPending = false;
  }
}

/**
 * What the server put in the page itself (`<script type="application/json">`, never run):
 * {config, sessions: the body of /api/sessions, events: the newest session's stored events
 * (absent when there were too many to inline), calls: serve mode's recent calls}; null
 * when the page came without it.
 */
function initialData() {
  const block = $('initial-data');
  if (!block) return null;
  try {
    return JSON.parse(block.textContent);
  } catch (error) {
    setStatus(`unreadable page data: ${error.message}`, 'bad');
    return null;
  }
}

function takeConfig(config) {
  state.config = config;
  if (config.mode === 'serve') {
    document.body.classList.add('serve');
    $('mode').textContent = 'MCP calls';
    $('title').textContent = 'Tool calls of this server';
  } else {
    $('mode').textContent = 'sessions';
  }
}

/** Takes a /api/sessions body; returns the newest session's key, if any. */
function takeSessions(body) {
  state.lastSeq = body.last_seq;
  for (const s of body.sessions) {
    const entry = session(s.app, s.user_id, s.session_id);
    entry.updated_ms = s.updated_ms;
    entry.events = s.events;
    entry.title = s.title;
  }
  const newest = body.sessions[0];
  return newest ? keyOf(newest.app, newest.user_id, newest.session_id) : null;
}

async function start() {
  const initial = initialData();
  try {
    if (initial) {
      // Drawn at once, before the first paint: the page needs no request to show the data.
      takeConfig(initial.config);
      for (const item of initial.calls || []) onItem(item);
      if (initial.sessions) {
        const newest = takeSessions(initial.sessions);
        if (newest && initial.events) loaded(state.sessions.get(newest), initial.events);
        if (newest) state.selected = newest;
      }
      drawSessions();
      drawMain();
      if (state.selected && !state.sessions.get(state.selected).loaded) await select(state.selected);
    } else {
      takeConfig(await api('/api/config'));
      if (state.config.mode !== 'serve') {
        const newest = takeSessions(await api('/api/sessions'));
        if (newest) await select(newest);
      }
    }
  } catch (error) {
    setStatus(`cannot load: ${error.message}`, 'bad');
    return;
  }
  $('chat').addEventListener('submit', send);
  $('message').addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey) {
      event.preventDefault();
      $('chat').requestSubmit();
    }
  });
  $('new-session').addEventListener('click', () => {
    state.selected = null;
    redraw();
    $('message').focus();
  });
  connect();
  redraw();
}

// Exposed for tests and curious users: the text of a message, as the cards show it.
window.toolbeltUi = { messageText };
start();
