import { afterEach, describe, expect, it, vi } from 'vitest';

import { asReply, ProtocolError, RequestTracker } from '../src/protocol';

describe('asReply', () => {
  it('accepts v1 replies only', () => {
    expect(asReply({ v: 1, id: 'a', op: 'hello', ok: true })).not.toBeNull();
    expect(asReply({ v: 1, id: null, op: null, ok: false, error: 'x' })).not.toBeNull();
    expect(asReply({ v: 2, id: 'a', ok: true })).toBeNull();
    expect(asReply({ v: 1, id: 'a' })).toBeNull();
    expect(asReply({ v: 1, id: {}, ok: true })).toBeNull();
    expect(asReply(null)).toBeNull();
    expect(asReply([1])).toBeNull();
    expect(asReply('text')).toBeNull();
  });
});

describe('RequestTracker', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('sends versioned requests with unique ids and matches replies', async () => {
    const sent: any[] = [];
    const t = new RequestTracker(r => sent.push(r), 'x');
    const a = t.request('list_apps');
    const b = t.request('stop', { app: 'k1' });
    expect(sent).toEqual([
      { v: 1, id: 'x1', op: 'list_apps' },
      { v: 1, id: 'x2', op: 'stop', app: 'k1' }
    ]);
    expect(t.inFlight('list_apps')).toBe(true);
    expect(t.receive({ v: 1, id: 'x2', op: 'stop', ok: true, stopped: true })).toBe(true);
    expect(t.receive({ v: 1, id: 'x1', op: 'list_apps', ok: true, apps: [] })).toBe(true);
    await expect(b).resolves.toMatchObject({ stopped: true });
    await expect(a).resolves.toMatchObject({ apps: [] });
    expect(t.inFlight('list_apps')).toBe(false);
    expect(t.size).toBe(0);
  });

  it('turns error replies into rejections with the kernel message', async () => {
    const t = new RequestTracker(() => undefined, 'e');
    const p = t.request('stop', { app: 'nope' });
    t.receive({ v: 1, id: 'e1', op: 'stop', ok: false, error: "no app with key 'nope'" });
    await expect(p).rejects.toThrow("no app with key 'nope'");
    await expect(p).rejects.toBeInstanceOf(ProtocolError);
  });

  it('ignores unknown, duplicate and malformed replies', async () => {
    const t = new RequestTracker(() => undefined, 'u');
    const p = t.request('hello');
    expect(t.receive({ v: 1, id: 'other', ok: true })).toBe(false);
    expect(t.receive('garbage')).toBe(false);
    expect(t.receive({ v: 1, id: null, ok: false, error: 'malformed' })).toBe(false);
    expect(t.receive({ v: 1, id: 'u1', op: 'hello', ok: true })).toBe(true);
    expect(t.receive({ v: 1, id: 'u1', op: 'hello', ok: true })).toBe(false);
    await expect(p).resolves.toBeTruthy();
  });

  it('times out and forgets the request', async () => {
    vi.useFakeTimers();
    const t = new RequestTracker(() => undefined, 't');
    const p = t.request('list_apps', {}, 1000);
    const check = expect(p).rejects.toThrow('no answer from the kernel within 1s');
    vi.advanceTimersByTime(1001);
    await check;
    expect(t.inFlight('list_apps')).toBe(false);
  });

  it('rejects when sending throws and on failAll', async () => {
    const t = new RequestTracker(() => {
      throw new Error('comm closed');
    });
    await expect(t.request('hello')).rejects.toThrow('comm closed');
    expect(t.size).toBe(0);
    const ok = new RequestTracker(() => undefined);
    const a = ok.request('list_apps');
    const b = ok.request('topics');
    ok.failAll('kernel restarting');
    await expect(a).rejects.toThrow('kernel restarting');
    await expect(b).rejects.toThrow('kernel restarting');
    expect(ok.size).toBe(0);
  });

  it('does not let caller args override the envelope', () => {
    const sent: any[] = [];
    const t = new RequestTracker(r => sent.push(r), 'z');
    void t.request('hello', { v: 9, id: 'evil', op: 'stop' }).catch(() => undefined);
    expect(sent[0]).toMatchObject({ v: 1, id: 'z1', op: 'hello' });
    t.failAll('done');
  });
});
