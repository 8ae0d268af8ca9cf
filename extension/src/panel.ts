/** The "Streams" side panel: the current notebook kernel's apps, live, and its cluster's topics. */

import { Widget } from '@lumino/widgets';

import { KernelClient } from './client';
import { el, replaceChildren } from './dom';
import { actionsFor, displayRate, formatCount, formatRate, sortApps, stateClass } from './format';
import { IAppSummary, ITopics } from './protocol';

export const REFRESH_MS = 1000;
const TOPICS_REFRESH_MS = 5000;

export interface IPanelOptions {
  /** The client of the current notebook's kernel and a label for it, or null when there is none. */
  currentClient: () => { client: KernelClient; label: string } | null;
  openApp: (client: KernelClient, app: IAppSummary) => void;
  openTopic: (client: KernelClient, topic: string, bootstrap: string) => void;
}

interface IRow {
  tr: HTMLTableRowElement;
  cells: { [name: string]: HTMLTableCellElement };
  label: HTMLElement;
  stateText: HTMLElement;
  processed: HTMLElement;
  stop: HTMLButtonElement;
  restart: HTMLButtonElement;
  app: IAppSummary;
}

export class StreamsPanel extends Widget {
  private _opts: IPanelOptions;
  private _timer: ReturnType<typeof setInterval> | null = null;
  private _status: HTMLElement;
  private _kernelLabel: HTMLElement;
  private _tbody: HTMLTableSectionElement;
  private _empty: HTMLElement;
  private _topicsBox: HTMLElement;
  private _topicsTitle: HTMLElement;
  private _rows = new Map<string, IRow>();
  private _previous = new Map<string, { processed: number; time: number }>();
  private _client: KernelClient | null = null;
  private _lastTopics = 0;
  private _topicsBootstrap = 'memory://';
  private _selected: string | null = null;

  constructor(options: IPanelOptions) {
    super();
    this._opts = options;
    this.id = 'kstream-nb-panel';
    this.addClass('kstream-panel');
    this.title.caption = 'Streams: kstream_nb apps of this notebook';
    this._kernelLabel = el('div', { class: 'kstream-kernel' }, 'no notebook');
    this._status = el('div', { class: 'kstream-status' }, '');
    this._tbody = el('tbody');
    this._empty = el('div', { class: 'kstream-empty' }, 'No apps in this kernel yet.');
    const refreshTopics = el('button', { class: 'kstream-btn kstream-refresh-topics', title: 'Refresh topics' }, '⟳');
    refreshTopics.addEventListener('click', () => {
      this._lastTopics = 0;
      void this._refreshTopics(true);
    });
    this._topicsTitle = el('span', {}, 'Topics');
    this._topicsBox = el('div', { class: 'kstream-topics' });
    this.node.appendChild(el('div', { class: 'kstream-header' }, el('h2', {}, 'Streams'), this._kernelLabel));
    this.node.appendChild(this._status);
    this.node.appendChild(
      el(
        'table',
        { class: 'kstream-table kstream-apps' },
        el(
          'thead',
          {},
          el(
            'tr',
            {},
            ...['app', 'state', 'rec/s', 'lag', 'tasks'].map(h => el('th', {}, h))
          )
        ),
        this._tbody
      )
    );
    this.node.appendChild(this._empty);
    this.node.appendChild(el('div', { class: 'kstream-section' }, this._topicsTitle, refreshTopics));
    this.node.appendChild(this._topicsBox);
  }

  protected onAfterAttach(): void {
    this._timer = setInterval(() => void this.refresh(), REFRESH_MS);
    void this.refresh();
  }

  protected onBeforeDetach(): void {
    if (this._timer !== null) {
      clearInterval(this._timer);
      this._timer = null;
    }
  }

  dispose(): void {
    this.onBeforeDetach();
    super.dispose();
  }

  /** One tick: (re)connect to the current kernel, ask for the apps, now and then for the topics. */
  async refresh(): Promise<void> {
    if (!this.isVisible) {
      return;
    }
    const current = this._opts.currentClient();
    if (!current) {
      this._setClient(null);
      this._kernelLabel.textContent = 'no notebook open';
      this._setStatus('Open a notebook to see its kstream_nb apps.');
      this._render([]);
      return;
    }
    this._setClient(current.client);
    this._kernelLabel.textContent = current.label;
    const client = current.client;
    await client.ensureOpen();
    if (client !== this._client) {
      return;
    }
    if (client.state !== 'connected') {
      this._setStatus(
        client.state === 'connecting'
          ? 'Connecting to the kernel…'
          : 'Not connected: run `%load_ext kstream_nb` in this notebook.'
      );
      return;
    }
    if (client.inFlight('list_apps')) {
      this._setStatus('Kernel busy (a cell is running)…');
      return;
    }
    try {
      const reply = await client.request('list_apps');
      if (client !== this._client) {
        return;
      }
      this._setStatus('');
      this._render(reply.apps as IAppSummary[]);
    } catch (e) {
      if (client === this._client) {
        this._setStatus(`list_apps: ${(e as Error).message}`);
      }
    }
    await this._refreshTopics(false);
  }

  private _setClient(client: KernelClient | null): void {
    if (client !== this._client) {
      this._client = client;
      this._previous.clear();
      this._lastTopics = 0;
      this._selected = null;
      this._render([]);
      replaceChildren(this._topicsBox);
    }
  }

  private _setStatus(text: string): void {
    if (this._status.textContent !== text) {
      this._status.textContent = text;
    }
    this._status.style.display = text ? '' : 'none';
  }

  private _render(apps: IAppSummary[]): void {
    const now = Date.now() / 1000;
    const sorted = sortApps(apps);
    const keep = new Set(sorted.map(a => a.key));
    for (const [key, row] of this._rows) {
      if (!keep.has(key)) {
        row.tr.remove();
        this._rows.delete(key);
        this._previous.delete(key);
      }
    }
    sorted.forEach((app, index) => {
      let row = this._rows.get(app.key);
      if (!row) {
        row = this._makeRow(app);
        this._rows.set(app.key, row);
      }
      row.app = app;
      const rate = displayRate(app, this._previous.get(app.key), now);
      this._previous.set(app.key, { processed: app.processed, time: now });
      setText(row.label, app.name);
      row.label.title = `${app.name} (${app.bootstrap}, key ${app.key})${app.error ? `\nerror: ${app.error}` : ''}`;
      setText(row.stateText, app.state);
      row.cells.state.className = `kstream-state kstream-state-${stateClass(app.state)}`;
      setText(row.cells.rate, formatRate(rate));
      setText(row.processed, `${formatCount(app.processed)} rec`);
      setText(row.cells.lag, formatCount(app.lag));
      setText(row.cells.tasks, String(app.tasks));
      const actions = actionsFor(app);
      row.stop.disabled = !actions.stop;
      row.restart.disabled = !actions.restart;
      row.tr.dataset.state = app.state;
      row.tr.dataset.processed = String(app.processed);
      row.tr.classList.toggle('kstream-selected', app.key === this._selected);
      if (this._tbody.children[index] !== row.tr) {
        this._tbody.insertBefore(row.tr, this._tbody.children[index] || null);
      }
    });
    this._empty.style.display = sorted.length ? 'none' : '';
  }

  private _makeRow(app: IAppSummary): IRow {
    const cell = (cls: string) => el('td', { class: cls });
    // compact for a narrow side bar: buttons under the name, processed count under the state
    const cells = {
      name: cell('kstream-app-name'),
      state: cell('kstream-state'),
      rate: cell('kstream-app-rate kstream-num'),
      lag: cell('kstream-app-lag kstream-num'),
      tasks: cell('kstream-app-tasks kstream-num')
    };
    const label = el('div', { class: 'kstream-app-label' });
    const actions = el('div', { class: 'kstream-actions' });
    const stateText = el('div', { class: 'kstream-state-text' });
    const processed = el('div', { class: 'kstream-app-processed', title: 'records processed' });
    cells.name.append(label, actions);
    cells.state.append(stateText, processed);
    const stop = el('button', { class: 'kstream-btn kstream-stop', title: 'Stop this app' }, 'Stop');
    const restart = el(
      'button',
      { class: 'kstream-btn kstream-restart', title: 'Stop, then start a new app with the same topology' },
      'Restart'
    );
    actions.append(stop, restart);
    const tr = el('tr', { class: 'kstream-app-row', 'data-key': app.key, 'data-name': app.name }, ...Object.values(cells));
    const row: IRow = { tr, cells, label, stateText, processed, stop, restart, app };
    stop.addEventListener('click', ev => {
      ev.stopPropagation();
      void this._act(row, 'stop');
    });
    restart.addEventListener('click', ev => {
      ev.stopPropagation();
      void this._act(row, 'restart');
    });
    tr.addEventListener('click', () => {
      const client = this._client;
      if (client) {
        this._selected = row.app.key;
        this._topicsBootstrap = row.app.bootstrap;
        this._lastTopics = 0;
        for (const r of this._rows.values()) {
          r.tr.classList.toggle('kstream-selected', r === row);
        }
        this._opts.openApp(client, row.app);
        void this._refreshTopics(true);
      }
    });
    return row;
  }

  private async _act(row: IRow, op: 'stop' | 'restart'): Promise<void> {
    const client = this._client;
    if (!client || client.state !== 'connected') {
      return;
    }
    row.stop.disabled = true;
    row.restart.disabled = true;
    setText(row.stateText, op === 'stop' ? 'STOPPING…' : 'RESTARTING…');
    try {
      const reply = await client.request(op, { app: row.app.key }, 70000);
      if (op === 'stop' && reply.stopped === false) {
        this._setStatus(`${row.app.name} did not stop in time; try again`);
      }
      if (op === 'restart' && this._selected === row.app.key) {
        this._selected = (reply.app as IAppSummary).key;
      }
    } catch (e) {
      this._setStatus(`${op} ${row.app.name}: ${(e as Error).message}`);
    }
    void this.refresh();
  }

  private async _refreshTopics(force: boolean): Promise<void> {
    const client = this._client;
    const now = Date.now();
    if (!client || client.state !== 'connected' || client.inFlight('topics')) {
      return;
    }
    if (!force && now - this._lastTopics < TOPICS_REFRESH_MS) {
      return;
    }
    this._lastTopics = now;
    if (!this._selected) {
      const first = [...this._rows.values()][0];
      if (first) {
        this._topicsBootstrap = first.app.bootstrap;
      }
    }
    try {
      const reply = (await client.request('topics', { bootstrap: this._topicsBootstrap })) as unknown as ITopics;
      if (client !== this._client) {
        return;
      }
      this._topicsTitle.textContent = `Topics on ${reply.bootstrap}`;
      const rows = reply.topics.map(t => {
        const link = el('a', { class: 'kstream-topic-link', href: '#', title: 'Profile and recent records' }, t.name);
        link.addEventListener('click', ev => {
          ev.preventDefault();
          this._opts.openTopic(client, t.name, reply.bootstrap);
        });
        return el(
          'tr',
          { class: t.internal ? 'kstream-internal' : '', 'data-topic': t.name },
          el('td', {}, link),
          el('td', { class: 'kstream-num' }, String(t.partitions)),
          el('td', { class: 'kstream-num' }, formatCount(t.records)),
          el('td', { class: 'kstream-offsets' }, t.end_offsets.join(' '))
        );
      });
      replaceChildren(
        this._topicsBox,
        rows.length
          ? el(
              'table',
              { class: 'kstream-table' },
              el('thead', {}, el('tr', {}, ...['topic', 'parts', 'records', 'end offsets'].map(h => el('th', {}, h)))),
              el('tbody', {}, ...rows)
            )
          : el('div', { class: 'kstream-empty' }, 'No topics.')
      );
    } catch (e) {
      replaceChildren(this._topicsBox, el('div', { class: 'kstream-error' }, `topics: ${(e as Error).message}`));
    }
  }
}

function setText(node: HTMLElement, text: string): void {
  if (node.textContent !== text) {
    node.textContent = text;
  }
}
