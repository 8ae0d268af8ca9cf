/** Main-area views: an app's topology graph + task/partition assignment, and a topic's profile and recent records. */

import { Widget } from '@lumino/widgets';

import { KernelClient } from './client';
import { el, replaceChildren, table } from './dom';
import {
  assignmentRows,
  formatCount,
  formatRate,
  formatTimestamp,
  newestFirst,
  showValue,
  stateClass
} from './format';
import { profileView } from './profile';
import { IAppDetail, IAppSummary, ITopicProfileReply, ITopicTail, ITopics } from './protocol';
import { layoutTopology, renderTopologySvg } from './topology';

const DETAIL_REFRESH_MS = 2000;

/** Polls while visible; subclasses fill `body`. */
abstract class PollingView extends Widget {
  protected client: KernelClient;
  protected status: HTMLElement;
  protected body: HTMLElement;
  private _timer: ReturnType<typeof setInterval> | null = null;
  private _busy = false;

  constructor(client: KernelClient) {
    super();
    this.client = client;
    this.addClass('kstream-view');
    this.status = el('div', { class: 'kstream-status' });
    this.body = el('div', { class: 'kstream-view-body' });
    this.node.append(this.status, this.body);
  }

  protected onAfterAttach(): void {
    this._timer = setInterval(() => void this.tick(), DETAIL_REFRESH_MS);
    void this.tick();
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

  async tick(): Promise<void> {
    if (this._busy || !this.isVisible) {
      return;
    }
    if (this.client.isDisposed) {
      this.status.textContent = 'The kernel of this view is gone.';
      return;
    }
    this._busy = true;
    try {
      await this.client.ensureOpen();
      if (this.client.state !== 'connected') {
        this.status.textContent = 'Not connected to the kernel.';
        return;
      }
      await this.update1();
      this.status.textContent = '';
    } catch (e) {
      this.status.textContent = (e as Error).message;
    } finally {
      this._busy = false;
    }
  }

  protected abstract update1(): Promise<void>;
}

export class AppDetailView extends PollingView {
  private _app: IAppSummary;
  private _summary: HTMLElement;
  private _graph: HTMLElement;
  private _assignment: HTMLElement;
  private _lastTopologyJson = '';

  constructor(client: KernelClient, app: IAppSummary) {
    super(client);
    this._app = app;
    this.addClass('kstream-app-view');
    this.id = `kstream-app-${app.key}`;
    this.title.label = `Streams: ${app.name}`;
    this.title.closable = true;
    this._summary = el('div', { class: 'kstream-summary' });
    this._graph = el('div', { class: 'kstream-graph' });
    this._assignment = el('div', { class: 'kstream-assignment' });
    this.body.append(
      this._summary,
      el('h3', {}, 'Topology'),
      this._graph,
      el('h3', {}, 'Tasks and partitions'),
      this._assignment
    );
  }

  get appKey(): string {
    return this._app.key;
  }

  protected async update1(): Promise<void> {
    const reply = (await this.client.request('app_detail', { app: this._app.key })) as unknown as IAppDetail;
    this._app = reply.app;
    const a = reply.app;
    replaceChildren(
      this._summary,
      el('span', { class: `kstream-state kstream-state-${stateClass(a.state)}` }, a.state),
      ` ${a.name} on ${a.bootstrap} · ${a.threads} thread(s) · ${a.tasks} task(s) · ` +
        `${formatRate(a.records_per_s)} rec/s · ${formatCount(a.processed)} processed · lag ${formatCount(a.lag)}`,
      a.error ? el('div', { class: 'kstream-error' }, `error: ${a.error}`) : null
    );
    const topologyJson = JSON.stringify(reply.topology);
    if (topologyJson !== this._lastTopologyJson) {
      this._lastTopologyJson = topologyJson;
      // renderTopologySvg escapes every label; the markup is ours
      this._graph.innerHTML = renderTopologySvg(layoutTopology(reply.topology));
    }
    const rows = assignmentRows(reply);
    replaceChildren(
      this._assignment,
      rows.length
        ? table(
            ['instance', 'thread', 'task', 'role', 'partitions', 'lag', 'state lag', 'moved'],
            rows.map(r => [
              r.instance,
              r.thread,
              r.movedFrom === null
                ? r.task
                : el('span', { class: 'kstream-moved', title: `moved from ${r.movedFrom} to ${r.instance}` }, r.task),
              r.role,
              r.role !== 'active' ? '' : r.local ? r.partitions.join(', ') : '(another instance)',
              r.local ? formatCount(r.partitions.reduce((s, p) => s + (reply.lag[p] || 0), 0)) : '',
              r.stateLag === null ? '' : formatCount(r.stateLag),
              r.movedFrom === null ? '' : `from ${r.movedFrom}`
            ]),
            'kstream-assignment-table'
          )
        : el('div', { class: 'kstream-empty' }, a.state === 'RUNNING' ? 'No tasks assigned.' : `No tasks (${a.state}).`)
    );
  }
}

export class TopicView extends PollingView {
  private _topic: string;
  private _bootstrap: string;
  private _partitions: HTMLElement;
  private _records: HTMLElement;
  private _profile: HTMLElement;
  private _profiled = false;
  private _n = 20;

  constructor(client: KernelClient, topic: string, bootstrap: string) {
    super(client);
    this._topic = topic;
    this._bootstrap = bootstrap;
    this.addClass('kstream-topic-view');
    this.id = `kstream-topic-${encodeURIComponent(bootstrap)}-${encodeURIComponent(topic)}`;
    this.title.label = `Topic: ${topic}`;
    this.title.closable = true;
    this._partitions = el('div');
    this._records = el('div');
    const select = el('select', { class: 'kstream-tail-n' });
    for (const n of [10, 20, 50, 100, 500]) {
      const option = el('option', { value: String(n) }, String(n));
      option.selected = n === this._n;
      select.appendChild(option);
    }
    select.addEventListener('change', () => {
      this._n = Number(select.value);
      void this.tick();
    });
    this._profile = el('div', { class: 'kstream-profile' }, 'Profiling…');
    const again = el('button', { class: 'kstream-btn kstream-profile-again', title: 'Sample the topic again' }, '⟳');
    again.addEventListener('click', () => {
      this._profiled = false;
      void this.tick();
    });
    this.body.append(
      el('h3', {}, `${topic} on ${bootstrap}`),
      el('h3', {}, 'Profile ', again),
      this._profile,
      el('h3', {}, 'Offsets'),
      this._partitions,
      el('h3', {}, 'Most recent records (last ', select, ' per partition, newest first)'),
      this._records
    );
  }

  protected async update1(): Promise<void> {
    if (!this._profiled) {
      await this._updateProfile();
    }
    const topics = (await this.client.request('topics', { bootstrap: this._bootstrap })) as unknown as ITopics;
    const info = topics.topics.find(t => t.name === this._topic);
    if (!info) {
      replaceChildren(this._partitions, el('div', { class: 'kstream-error' }, `topic ${this._topic} does not exist`));
      replaceChildren(this._records);
      return;
    }
    replaceChildren(
      this._partitions,
      table(
        ['partition', 'beginning offset', 'end offset', 'records'],
        info.end_offsets.map((end, p) => [
          String(p),
          String(info.beginning_offsets[p]),
          String(end),
          formatCount(end - info.beginning_offsets[p])
        ])
      )
    );
    const tail = (await this.client.request('topic_tail', {
      topic: this._topic,
      bootstrap: this._bootstrap,
      n: this._n
    })) as unknown as ITopicTail;
    const records = newestFirst(tail.records);
    replaceChildren(
      this._records,
      records.length
        ? table(
            ['partition', 'offset', 'timestamp', 'key', 'value'],
            records.map(r => [
              String(r.partition),
              String(r.offset),
              formatTimestamp(r.timestamp),
              detected(r.key, r.key_format),
              detected(r.value, r.value_format)
            ]),
            'kstream-records'
          )
        : el('div', { class: 'kstream-empty' }, 'No records.')
    );
  }

  /** Asks for the topic's profile (once when the view opens, again on its button: sampling costs reads). */
  private async _updateProfile(): Promise<void> {
    this._profiled = true;
    try {
      const reply = (await this.client.request('topic_profile', {
        topic: this._topic,
        bootstrap: this._bootstrap
      })) as unknown as ITopicProfileReply;
      const view = profileView(reply.profile);
      replaceChildren(
        this._profile,
        el('div', { class: 'kstream-profile-summary' }, view.summary),
        el('div', { class: 'kstream-profile-time' }, `Time range: ${view.timeRange}`),
        table(view.partitions.headers, view.partitions.rows, 'kstream-profile-partitions'),
        el('div', { class: 'kstream-profile-formats' }, view.formats),
        el('div', { class: 'kstream-profile-keys' }, view.keys),
        view.columns ? el('div', {}, `${view.columnsTitle}:`) : null,
        view.columns ? table(view.columns.headers, view.columns.rows, 'kstream-profile-columns') : null
      );
    } catch (e) {
      replaceChildren(this._profile, el('div', { class: 'kstream-error' }, `profile: ${(e as Error).message}`));
    }
  }
}

/** A record's key or value, with the format the kernel detected as its tooltip. */
function detected(value: unknown, format: string | undefined): HTMLElement {
  return el('span', format ? { title: `format: ${format}` } : {}, showValue(value));
}
