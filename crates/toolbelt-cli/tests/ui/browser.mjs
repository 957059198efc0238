// The web UI in a real headless Chromium, driven by playwright-core. Started by
// crates/toolbelt-cli/tests/ui.rs, which runs `toolbelt ui` and the scripted model server and
// starts the scripted run when this script prints READY.
//
// Environment: UI_URL (the URL toolbelt printed, with ?token=), PLAYWRIGHT_CORE (the
// package's index.mjs), CHROMIUM (the browser binary), SCREENSHOTS (a directory; screenshots
// are taken only when it is set).
//
// Prints PASS and exits 0 when every check holds; otherwise prints the failure and exits 1.

import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const { chromium } = await import(pathToFileURL(process.env.PLAYWRIGHT_CORE).href);

const TIMEOUT = 60_000;
const problems = [];

function check(condition, message) {
  if (!condition) throw new Error(message);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM,
  headless: true,
  timeout: TIMEOUT,
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
  // launch() starts the browser with a fresh temporary profile of its own (the contract's
  // fresh --user-data-dir) and removes it on close.
});

let failed = null;
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(TIMEOUT);
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning') problems.push(`console ${message.type()}: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('dialog', (dialog) => {
    problems.push(`a dialog opened: ${dialog.message()}`);
    dialog.dismiss();
  });

  // The token in the URL is traded for a cookie and dropped from the address bar.
  await page.goto(process.env.UI_URL);
  check(!page.url().includes('token='), `the token stayed in the address bar: ${page.url()}`);
  await page.waitForSelector('#status.good');
  if (process.env.SCENARIO === 'tree') {
    await invocationTree(page);
  } else if (process.env.SCENARIO === 'plan') {
    await planPanel(page);
  } else if (process.env.SCENARIO === 'approval') {
    await approvalButtons(page);
  } else if (process.env.SCENARIO === 'graph') {
    await graphRun(page);
  } else if (process.env.SCENARIO === 'markdown') {
    await markdownAndFirstPaint(page);
  } else {
    await liveRunAndChat(page);
  }
  check(problems.length === 0, `the page reported problems:\n${problems.join('\n')}`);
} catch (error) {
  failed = error;
} finally {
  await browser.close();
}
if (failed) {
  console.log(`FAIL ${failed.stack || failed}`);
  if (problems.length) console.log(problems.join('\n'));
  process.exit(1);
}
console.log('PASS');

/** A live run that writes its plan with TodoWrite, updates it, then has a list refused. */
async function planPanel(page) {
  check(await page.locator('#plan').isHidden(), 'a plan was shown before any TodoWrite');
  console.log('READY');
  await page.waitForSelector('.run-head .badge.ok');
  await page.waitForSelector('.card.tool.error[data-tool="TodoWrite"]');
  const panel = page.locator('#plan');
  check(await panel.isVisible(), 'the plan panel is not shown');
  const items = await panel.locator('li.todo').evaluateAll((nodes) => nodes.map((n) => [n.dataset.status, n.querySelector('.todo-text').textContent]));
  const expected = [
    ['completed', 'Read the notes'],
    ['in_progress', 'Fixing the <img src=x onerror=window.__pwned=5> bug'],
    ['pending', 'Run the tests'],
  ];
  check(JSON.stringify(items) === JSON.stringify(expected), `the plan shows ${JSON.stringify(items)}`);
  const head = await panel.locator('.plan-head').textContent();
  check(head.includes('1 of 3 done'), `the plan's head: ${head}`);
  check((await page.locator('img[src="x"]').count()) === 0, 'an img element was injected');
  check((await page.evaluate(() => window.__pwned)) === undefined, 'markup from the plan ran');
  // Still in view while the runs scroll under it.
  await page.evaluate(() => {
    const pane = document.getElementById('run-pane');
    pane.scrollTop = pane.scrollHeight;
  });
  const box = await panel.boundingBox();
  check(box && box.y >= 40 && box.y < 100, `the panel scrolled away or under the header: ${JSON.stringify(box)}`);
  if (process.env.SCREENSHOTS) {
    await page.screenshot({ path: join(process.env.SCREENSHOTS, 'ui-plan.png') });
  }
}

/**
 * A run paused (by another process) on two Writes: the page shows each call's diff and
 * buttons; one is approved, the other denied with a reason, and only then does the run
 * resume, from the page, and complete.
 */
async function approvalButtons(page) {
  const waiting = page.locator('.card.approval.waiting');
  await waiting.first().waitFor();
  check((await waiting.count()) === 2, `expected two paused calls, got ${await waiting.count()}`);
  const first = waiting.nth(0);
  const added = await first.locator('.diff .line.add').allTextContents();
  check(added.some((l) => l.includes('hello')), `the first call's diff: ${JSON.stringify(added)}`);
  check((await page.locator('.card.tool[data-tool="Write"]').count()) === 0, 'a paused call showed as a running tool');
  check((await first.locator('button.always').count()) === 1, 'a paused call has no Always button');
  if (process.env.SCREENSHOTS) {
    await page.screenshot({ path: join(process.env.SCREENSHOTS, 'ui-approval.png') });
  }
  await first.locator('button.approve').click();
  // One of two decided: nothing resumes yet.
  await page.waitForFunction(() => document.querySelector('#chat-note').textContent.includes('1 of 2'));
  check((await page.locator('.run').count()) === 1, 'the run resumed before every paused call was decided');
  const second = page.locator('.card.approval.waiting').nth(1);
  await second.locator('.deny-message').fill('not that one');
  await second.locator('button.deny').click();
  // The resumed run: both decisions, the approved Write's result, the answer.
  await page.waitForFunction(() => document.querySelectorAll('.run-head .badge.ok').length === 2);
  check((await page.locator('.card.decided').count()) === 2, 'the decisions are not shown');
  check((await page.locator('.card.approval.waiting').count()) === 0, 'a decided call still shows its buttons');
  const written = page.locator('.card.tool.ok[data-tool="Write"]');
  check((await written.count()) === 1, 'the approved Write did not run once');
  const refused = page.locator('.card.tool.error[data-tool="Write"]');
  check((await refused.locator('.tool-error').textContent()).includes('not that one'), 'the denial lacks its reason');
  await page.locator('.card.model', { hasText: 'One written, one refused.' }).waitFor();
}

/** The nodes of a `.graph-path` as [node, state] pairs. */
async function pathOf(path) {
  return path.locator('.graph-node').evaluateAll((nodes) => nodes.map((n) => [n.dataset.node, n.dataset.state]));
}

/**
 * A graph run (another process's) that stopped at a question: its path shows the drafting
 * step ended and the asking one waiting; the answer typed in the chat box resumes it, and
 * the second run's path shows the rest of the workflow.
 */
async function graphRun(page) {
  await page.locator('.session').first().click();
  const first = page.locator('.graph-path').first();
  await first.waitFor();
  const before = await pathOf(first);
  check(JSON.stringify(before) === JSON.stringify([['draft', 'ok'], ['approve', 'asking']]), `the first run's path: ${JSON.stringify(before)}`);
  const question = page.locator('.card.asking');
  check((await question.count()) === 1, 'the question is not shown');
  check((await question.locator('pre').textContent()).includes('Write these notes to RELEASE.md?'), 'the question text');
  // The draft the person is asked about: the agent node's answer, stored in its update.
  const draft = page.locator('.card.node-output[data-node="draft"]');
  check((await draft.count()) === 1, `the draft shows ${await draft.count()} times`);
  check((await draft.textContent()).includes('v2 notes <img src=x onerror=window.__pwned=6>'), `the draft: ${await draft.textContent()}`);
  check((await page.locator('img[src="x"]').count()) === 0, 'markup in the draft became an element');
  if (process.env.SCREENSHOTS) {
    await page.screenshot({ path: join(process.env.SCREENSHOTS, 'ui-graph.png') });
  }
  await page.fill('#message', 'yes');
  await page.press('#message', 'Enter');
  await page.locator('.card.model:not(.streaming)', { hasText: 'Wrote RELEASE.md.' }).first().waitFor();
  check((await page.locator('.card.model.streaming').count()) <= 1, 'streaming text is shown in more than one run');
  await page.waitForFunction(() => document.querySelectorAll('.run-head .badge.ok').length === 2);
  // The graph's answer repeats the publishing model's last text: shown once, on that card.
  const answer = page.locator('.card', { hasText: 'Wrote RELEASE.md.' });
  check((await answer.count()) === 1, `the final answer shows ${await answer.count()} times`);
  check((await answer.locator('.answer-mark').count()) === 1, 'the answering card is not marked as the answer');
  check((await answer.locator('.stat.tokens').count()) === 1, 'the answer kept is not the model call (with its tokens)');
  check((await page.locator('.card.node-output').count()) === 1, 'a node output repeats a card (the question, or the model text)');
  const nodes = await page.locator('.run').nth(1).locator('.card.model .node').allTextContents();
  check(JSON.stringify(nodes) === JSON.stringify(['node publish', 'node publish']), `the model cards' nodes: ${JSON.stringify(nodes)}`);
  if (process.env.SCREENSHOTS) {
    await page.screenshot({ path: join(process.env.SCREENSHOTS, 'ui-graph-answer.png') });
  }
  const paths = page.locator('.graph-path');
  check((await paths.count()) === 2, `expected a path per run, got ${await paths.count()}`);
  const after = await pathOf(paths.nth(1));
  const expected = [['approve', 'ok'], ['publish', 'ok'], ['tools', 'ok'], ['publish', 'ok']];
  check(JSON.stringify(after) === JSON.stringify(expected), `the resumed run's path: ${JSON.stringify(after)}`);
  check((await page.evaluate(() => window.__pwned)) === undefined, 'markup from the model ran');
}

/** A stored run whose root agent handed over to a sub-agent: one run, a nested tree. */
async function invocationTree(page) {
  await page.waitForSelector('.run-head .badge.ok');
  check((await page.locator('.run').count()) === 1, 'the sub-agent\'s invocation made a run of its own');
  const outer = page.locator('.run > details > ul.tree > li');
  check((await outer.count()) === 1, 'one root invocation expected');
  check((await outer.locator('> .agent').textContent()) === 'coordinator', 'the root is not the coordinator');
  const inner = outer.locator('> .tree > li > .agent');
  check((await inner.textContent()) === 'planner', 'the planner is not nested under the coordinator');
  const answer = page.locator('.card.model', { hasText: 'Here is the plan' });
  check((await answer.locator('.agent').textContent()) === 'planner', 'the plan is not attributed to the planner');
  if (process.env.SCREENSHOTS) {
    await page.screenshot({ path: join(process.env.SCREENSHOTS, 'ui-tree.png') });
  }
}

/** A run made by another process appears live; then a run started from the chat box. */
async function liveRunAndChat(page) {
  check((await page.locator('.run').count()) === 0, 'a run was shown before one started');
  console.log('READY');

  // ---- the scripted run, started by the test in another process, appears live ----
  await page.waitForSelector('.run-head .badge.ok');
  const kinds = await page.$$eval('.run .cards > .card', (cards) =>
    cards.map((c) => (c.classList.contains('tool') ? `tool:${c.dataset.tool}` : [...c.classList].find((k) => k !== 'card'))),
  );
  const expected = ['user', 'model', 'tool:Read', 'tool:Read', 'model', 'tool:Edit', 'model', 'tool:Read', 'model', 'tool:Read', 'model'];
  check(JSON.stringify(kinds) === JSON.stringify(expected), `cards in the wrong order: ${JSON.stringify(kinds)}`);
  check((await page.locator('.session').count()) === 1, 'the new session is not listed');
  // A session that appeared live gets its title (the first prompt) from the server.
  const sessionTitle = page.locator('.session .session-title');
  await sessionTitle.waitFor();
  check((await sessionTitle.textContent()) === 'Look at my files', `the session's title: ${await sessionTitle.textContent()}`);

  // Model cards carry latency, tokens (the scripted server reports usage) and request size.
  const firstModel = page.locator('.card.model').first();
  const latency = await firstModel.locator('.latency').textContent();
  const tokens = await firstModel.locator('.tokens').textContent();
  const modelHead = await firstModel.locator('.card-head').textContent();
  check(/^\d+(\.\d+)? m?s$/.test(latency), `the model card's latency: ${latency}`);
  check(/^tokens: \d+ in \/ \d+ out$/.test(tokens), `the model card's tokens: ${tokens}`);
  check(modelHead.includes('sent'), `the model card lacks the request size: ${modelHead}`);

  await fixedFrame(page);

  // The Edit's diff, rendered as one.
  const edit = page.locator('.card.tool[data-tool="Edit"]');
  const removed = await edit.locator('.diff .line.del').allTextContents();
  const added = await edit.locator('.diff .line.add').allTextContents();
  check(removed.some((l) => l.includes('alpha')), `no removed line with alpha: ${JSON.stringify(removed)}`);
  check(added.some((l) => l.includes('gamma')), `no added line with gamma: ${JSON.stringify(added)}`);

  // The Read of an image shows the image, decoded.
  const image = page.locator('img.tool-image');
  await image.waitFor();
  const width = await image.evaluate((img) => (img.complete ? img.naturalWidth : -1));
  check(width === 8, `the image did not decode (naturalWidth ${width})`);

  // The failing call shows its error.
  const failing = page.locator('.card.tool.error');
  check((await failing.count()) === 1, 'one failing tool card expected');
  const errorText = await failing.locator('.tool-error').textContent();
  check(errorText.includes('missing.txt'), `the error does not name the file: ${errorText}`);

  // Markup from a tool result and from the model stays text.
  const payloadCard = page.locator('.card.tool[data-tool="Read"]').nth(3);
  // Read shows users a summary; the text itself is under "sent to the model".
  const payloadText = (await payloadCard.locator('pre.result').allTextContents()).join('\n');
  check(payloadText.includes('<script>window.__pwned = 1</script>'), `the payload is not shown as text: ${payloadText}`);
  const finalText = await page.locator('.card.model').last().textContent();
  check(finalText.includes('<script>window.__pwned = 3</script>'), `the model's markup is not shown as text: ${finalText}`);
  check((await page.evaluate(() => window.__pwned)) === undefined, 'a script from a result ran');
  check((await scriptsThatRun(page)) === 1, 'a script element was injected');
  check((await page.locator('img[src="x"]').count()) === 0, 'an img element was injected');

  // The timeline has a bar for each model and tool call.
  const bars = await page.locator('.timeline .bar').count();
  check(bars === 10, `expected 10 timeline bars (5 model, 5 tool calls), got ${bars}`);

  if (process.env.SCREENSHOTS) {
    await page.screenshot({ path: join(process.env.SCREENSHOTS, 'ui-run.png'), fullPage: true });
  }

  // ---- a run started from the chat box, in a new session ----
  await page.click('#new-session');
  await page.fill('#message', 'Say hello from the chat box');
  await page.press('#message', 'Enter');
  await page.waitForFunction(() => document.querySelectorAll('.session').length === 2);
  const answer = page.locator('.card.model', { hasText: 'Hello from the chat box' });
  await answer.waitFor();
  await page.waitForSelector('.run-head .badge.ok');
  await page.waitForFunction(() => !document.querySelector('#send').disabled);
  const chatCards = await page.$$eval('.run .cards > .card', (cards) => cards.map((c) => [...c.classList].find((k) => k !== 'card')));
  check(JSON.stringify(chatCards) === JSON.stringify(['user', 'model']), `chat run cards: ${JSON.stringify(chatCards)}`);
  if (process.env.SCREENSHOTS) {
    await page.screenshot({ path: join(process.env.SCREENSHOTS, 'ui-chat.png') });
  }

}

/** The scripts of the page that would run (the data block is `application/json`, never run). */
async function scriptsThatRun(page) {
  return page.evaluate(() => [...document.scripts].filter((s) => s.type !== 'application/json').length);
}

/**
 * The header and the session list stay in place while the run pane scrolls beside them: the
 * page itself does not scroll.
 */
async function fixedFrame(page) {
  const scrollable = await page.evaluate(() => {
    const pane = document.getElementById('run-pane');
    return pane.scrollHeight > pane.clientHeight + 200;
  });
  check(scrollable, 'the run does not fill more than its pane: the layout check would prove nothing');
  await page.evaluate(() => {
    const pane = document.getElementById('run-pane');
    pane.scrollTop = pane.scrollHeight;
    window.scrollTo(0, document.documentElement.scrollHeight);
  });
  await page.waitForFunction(() => document.getElementById('run-pane').scrollTop > 200);
  check((await page.evaluate(() => window.scrollY)) === 0, 'the whole page scrolled');
  const header = await page.locator('#top').boundingBox();
  const sidebar = await page.locator('#sidebar').boundingBox();
  const pane = await page.locator('#run-pane').boundingBox();
  check(header && Math.abs(header.y) < 1, `the header scrolled away: ${JSON.stringify(header)}`);
  check(sidebar && Math.abs(sidebar.y - header.height) < 2, `the session list scrolled away: ${JSON.stringify(sidebar)}`);
  check(pane && pane.x >= sidebar.x + sidebar.width - 1 && Math.abs(pane.y - header.height) < 2, `the run pane is not beside the list: ${JSON.stringify(pane)}`);
  const first = await page.locator('.session').first().boundingBox();
  check(first && first.y >= header.height && first.y < 200, `the session list is not in view: ${JSON.stringify(first)}`);
  const chat = await page.locator('#chat').boundingBox();
  check(chat && Math.abs(chat.y + chat.height - 900) < 2, `the chat box is not at the bottom: ${JSON.stringify(chat)}`);
  await page.evaluate(() => {
    document.getElementById('run-pane').scrollTop = 0;
  });
}

/** Checks that markup from the model, a tool or a title ran nothing and made no element. */
async function inert(page, where) {
  check((await page.evaluate(() => window.__pwned)) === undefined, `markup ran (${where}): __pwned = ${await page.evaluate(() => window.__pwned)}`);
  check((await scriptsThatRun(page)) === 1, `a script element was injected (${where})`);
  check((await page.locator('img[src="x"]').count()) === 0, `an img element was injected (${where})`);
  const bad = await page.$$eval('a', (links) => links.filter((a) => !/^https?:/.test(a.href)).map((a) => a.href));
  check(bad.length === 0, `links to other schemes (${where}): ${JSON.stringify(bad)}`);
}

/**
 * A stored run (another process's, before the page opened) whose model wrote Markdown and
 * markup, whose tool returned markup, and whose title holds `</script>`. First with every API
 * request refused: the first paint alone shows the sessions and the run. Then the live page:
 * the Markdown laid out, the markup shown as text, counts in the singular, the frame fixed.
 */
async function markdownAndFirstPaint(page) {
  const TITLE = '</script><script>window.__pwned = 7</script> notes';
  // ---- the first paint, with the API out of reach ----
  // A page of its own, with the cookie the first page got for the token.
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  await context.addCookies(await page.context().cookies());
  const cold = await context.newPage();
  cold.on('pageerror', (error) => problems.push(`page error (first paint): ${error.message}`));
  const asked = [];
  await cold.route('**/api/**', (route) => {
    asked.push(new URL(route.request().url()).pathname);
    return route.abort();
  });
  await cold.goto(process.env.UI_URL.split('?')[0]);
  await cold.waitForLoadState('load');
  if (process.env.SCREENSHOTS) {
    await cold.screenshot({ path: join(process.env.SCREENSHOTS, 'ui-first-paint.png') });
  }
  check((await cold.locator('.session').count()) === 2, `the first paint lists ${await cold.locator('.session').count()} sessions`);
  const titles = await cold.locator('.session-title').allTextContents();
  check(titles.includes(TITLE), `the first paint's titles: ${JSON.stringify(titles)}`);
  check((await cold.locator('.run .card.model .md h1').count()) === 1, 'the first paint shows no run');
  check((await cold.locator('.card.tool[data-tool="Read"]').count()) === 2, 'the first paint lacks the tool cards');
  check(!asked.some((p) => p !== '/api/stream'), `the first paint needed the API: ${JSON.stringify(asked)}`);
  await inert(cold, 'first paint');
  await context.close();

  // ---- the live page ----
  await page.locator('.run .card.model .md h1').waitFor();
  const md = page.locator('.card.model .md').last();
  check((await md.locator('h1').textContent()) === 'Release notes', `the heading: ${await md.locator('h1').textContent()}`);
  check((await md.locator('h2').textContent()) === 'Details', 'the second heading');
  const code = await md.locator('pre.code code').textContent();
  check(code === 'fn main() {\n    println!("<b>hi</b>");\n}', `the code block: ${JSON.stringify(code)}`);
  check((await md.locator('pre.code code').getAttribute('data-lang')) === 'rust', 'the code block lost its language');
  const items = await md.locator('ul > li').allTextContents();
  check(items.length >= 3 && items[0] === 'first item' && items[1] === 'second with code', `the list: ${JSON.stringify(items.slice(0, 3))}`);
  check((await md.locator('ul > li code').first().textContent()) === 'code', 'inline code in the list');
  check((await md.locator('ol > li').count()) === 2, 'the ordered list');
  check((await md.locator('strong').first().textContent()) === 'bold', 'strong text');
  check((await md.locator('em').first().textContent()) === 'slanted', 'emphasis');
  check((await md.locator('blockquote').textContent()).includes('a quote'), 'the block quote');
  const link = md.locator('a', { hasText: 'the docs' });
  check((await link.getAttribute('href')) === 'https://example.com/docs', 'the link target');
  check((await link.getAttribute('rel')) === 'noopener noreferrer', `the link's rel: ${await link.getAttribute('rel')}`);
  check((await md.locator('a').count()) === 1, 'a link was made of the javascript: target');
  const text = await md.textContent();
  for (const shown of ['<img src=x onerror="window.__pwned = 8">', '<script>window.__pwned = 9</script>', '[click me](javascript:window.__pwned=10)']) {
    check(text.includes(shown), `the model's markup is not shown as text: ${shown}`);
  }
  const payload = (await page.locator('.card.tool[data-tool="Read"]').nth(1).locator('pre.result').allTextContents()).join('\n');
  check(payload.includes('<script>window.__pwned = 1</script>'), `the tool's markup is not shown as text: ${payload}`);
  await inert(page, 'live page');

  // ---- singular and plural ----
  const one = (await page.locator('.card.tool[data-tool="Read"]').first().locator('pre.result').first().textContent()).trim();
  check(/^Read 1 line of .*one\.txt$/.test(one), `a one-line Read says: ${one}`);
  const metas = await page.locator('.session-meta').allTextContents();
  check(metas.some((m) => m.startsWith('1 event ·')), `a session of one event says: ${JSON.stringify(metas)}`);
  check(metas.some((m) => /^\d+ events ·/.test(m)), `a session of several events says: ${JSON.stringify(metas)}`);

  await fixedFrame(page);
  if (process.env.SCREENSHOTS) {
    await page.screenshot({ path: join(process.env.SCREENSHOTS, 'ui-markdown.png') });
    await page.evaluate(() => {
      const pane = document.getElementById('run-pane');
      pane.scrollTop = pane.scrollHeight;
    });
    await page.screenshot({ path: join(process.env.SCREENSHOTS, 'ui-scrolled.png') });
  }
}
