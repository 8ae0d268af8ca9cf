/**
 * One comm per kernel to the `kstream_nb.panel` target. The kernel registers the target on
 * `%load_ext kstream_nb`; until then opening fails (the kernel closes the comm) and the client retries
 * every few seconds, so the panel connects once the extension is loaded.
 */

import { Kernel } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import { COMM_TARGET, IReply, Op, PROTOCOL_VERSION, ProtocolError, RequestTracker } from './protocol';

export type ConnectionState = 'connecting' | 'connected' | 'unavailable' | 'disposed';

const RETRY_MS = 3000;

export class KernelClient {
  readonly kernel: Kernel.IKernelConnection;
  private _comm: Kernel.IComm | null = null;
  private _tracker: RequestTracker;
  private _state: ConnectionState = 'unavailable';
  private _lastTry = 0;
  private _opening: Promise<void> | null = null;
  private _stateChanged = new Signal<this, ConnectionState>(this);

  constructor(kernel: Kernel.IKernelConnection) {
    this.kernel = kernel;
    this._tracker = new RequestTracker(data => {
      if (!this._comm || this._comm.isDisposed) {
        throw new ProtocolError('not connected to the kernel');
      }
      this._comm.send(data as any);
    }, `k${Math.random().toString(36).slice(2, 7)}-`);
    kernel.statusChanged.connect(this._onKernelStatus, this);
    kernel.disposed.connect(() => this.dispose());
  }

  get state(): ConnectionState {
    return this._state;
  }

  get stateChanged(): ISignal<this, ConnectionState> {
    return this._stateChanged;
  }

  get isDisposed(): boolean {
    return this._state === 'disposed';
  }

  /** Opens the comm if it is not open (at most every few seconds); resolves when that attempt ends. */
  ensureOpen(force = false): Promise<void> {
    if (this._state === 'disposed') {
      return Promise.resolve();
    }
    if (this._comm && !this._comm.isDisposed && this._state === 'connected') {
      return Promise.resolve();
    }
    if (this._comm && this._comm.isDisposed) {
      this._lost('the comm was closed');
    }
    if (this._opening) {
      return this._opening;
    }
    const now = Date.now();
    if (!force && now - this._lastTry < RETRY_MS) {
      return Promise.resolve();
    }
    if (this.kernel.connectionStatus !== 'connected' || this.kernel.status === 'dead') {
      return Promise.resolve();
    }
    this._lastTry = now;
    this._opening = this._open().finally(() => {
      this._opening = null;
    });
    return this._opening;
  }

  request(op: Op, args: { [k: string]: unknown } = {}, timeoutMs = 60000): Promise<IReply> {
    if (this._state !== 'connected') {
      return Promise.reject(new ProtocolError('not connected to the kernel'));
    }
    return this._tracker.request(op, args, timeoutMs);
  }

  inFlight(op: Op): boolean {
    return this._tracker.inFlight(op);
  }

  dispose(): void {
    if (this._state === 'disposed') {
      return;
    }
    this._tracker.failAll('disposed');
    try {
      if (this._comm && !this._comm.isDisposed) {
        this._comm.close();
      }
    } catch {
      // the kernel may already be gone
    }
    this._comm = null;
    this._setState('disposed');
    Signal.clearData(this);
  }

  private async _open(): Promise<void> {
    this._setState('connecting');
    let comm: Kernel.IComm;
    try {
      comm = this.kernel.createComm(COMM_TARGET);
    } catch (e) {
      this._setState('unavailable');
      return;
    }
    this._comm = comm;
    comm.onMsg = msg => {
      this._tracker.receive(msg.content.data);
    };
    comm.onClose = () => {
      if (this._comm === comm) {
        this._lost('the kernel closed the comm');
      }
    };
    try {
      await comm.open({ v: PROTOCOL_VERSION }).done;
    } catch {
      // fall through: checked below
    }
    if (comm.isDisposed || this._comm !== comm) {
      if (this._comm === comm) {
        this._lost('no kstream_nb.panel target in this kernel');
      }
      return;
    }
    this._setState('connected');
    try {
      await this._tracker.request('hello', {}, 15000);
    } catch (e) {
      if (this._comm === comm) {
        this._lost(`hello failed: ${(e as Error).message}`);
      }
    }
  }

  private _lost(reason: string): void {
    this._tracker.failAll(reason);
    this._comm = null;
    if (this._state !== 'disposed') {
      this._setState('unavailable');
    }
  }

  private _onKernelStatus(_: Kernel.IKernelConnection, status: Kernel.Status): void {
    if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
      this._lost(`kernel ${status}`);
      this._lastTry = 0;
    }
  }

  private _setState(state: ConnectionState): void {
    if (this._state !== state) {
      this._state = state;
      this._stateChanged.emit(state);
    }
  }
}

/** One client per kernel connection, shared by the panel and the main-area views. */
export class ClientRegistry {
  private _clients = new Map<Kernel.IKernelConnection, KernelClient>();

  get(kernel: Kernel.IKernelConnection): KernelClient {
    let client = this._clients.get(kernel);
    if (!client || client.isDisposed) {
      client = new KernelClient(kernel);
      this._clients.set(kernel, client);
      client.stateChanged.connect((c, state) => {
        if (state === 'disposed' && this._clients.get(kernel) === c) {
          this._clients.delete(kernel);
        }
      });
    }
    return client;
  }
}
