/**
 * kstream-nb: the JupyterLab side of kstream_nb.
 *
 * - "Streams" side panel: the apps of the current notebook's kernel (name, state, records/s, lag,
 *   tasks) refreshed every second through the `kstream_nb.panel` comm, with stop/restart buttons and
 *   the topics of the app's cluster; clicking an app opens its topology and assignment, clicking a
 *   topic its recent records.
 * - `%%kstream` cells are edited as (I)Python whatever the notebook's language.
 */

import { ILabShell, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { MainAreaWidget } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { LabIcon } from '@jupyterlab/ui-components';

import { ClientRegistry, KernelClient } from './client';
import { cellMimeType, isKstreamCell } from './format';
import { StreamsPanel } from './panel';
import { IAppSummary } from './protocol';
import { AppDetailView, TopicView } from './views';

const ICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" width="16"><g class="jp-icon3" fill="#616161">' +
  '<circle cx="5" cy="6" r="2.5"/><circle cx="5" cy="18" r="2.5"/><circle cx="19" cy="12" r="2.5"/>' +
  '<path d="M7 6.5 L16.6 11 L16.6 13 L7 17.5 L7 15.3 L13.8 12 L7 8.7 Z"/></g></svg>';

export const streamsIcon = new LabIcon({ name: 'kstream-nb:streams', svgstr: ICON_SVG });

export const COMMAND_OPEN = 'kstream-nb:open-panel';

const panelPlugin: JupyterFrontEndPlugin<void> = {
  id: 'kstream-nb:panel',
  description: 'Streams side panel for kstream_nb apps running in the notebook kernel',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ILabShell],
  activate: (app: JupyterFrontEnd, notebooks: INotebookTracker, labShell: ILabShell | null) => {
    const clients = new ClientRegistry();
    const views = new Map<string, MainAreaWidget>();

    const openView = (id: string, make: () => AppDetailView | TopicView) => {
      const existing = views.get(id);
      if (existing && !existing.isDisposed) {
        app.shell.activateById(existing.id);
        return;
      }
      const content = make();
      const widget = new MainAreaWidget({ content });
      widget.id = content.id + '-main';
      widget.title.label = content.title.label;
      widget.title.icon = streamsIcon;
      widget.title.closable = true;
      views.set(id, widget);
      widget.disposed.connect(() => views.delete(id));
      app.shell.add(widget, 'main', { mode: 'split-right' });
      app.shell.activateById(widget.id);
    };

    const panel = new StreamsPanel({
      currentClient: () => {
        const nb = notebooks.currentWidget;
        const kernel = nb?.sessionContext.session?.kernel;
        if (!nb || !kernel) {
          return null;
        }
        return { client: clients.get(kernel), label: nb.title.label || nb.context.path };
      },
      openApp: (client: KernelClient, summary: IAppSummary) =>
        openView(`app:${summary.key}`, () => new AppDetailView(client, summary)),
      openTopic: (client: KernelClient, topic: string, bootstrap: string) =>
        openView(`topic:${bootstrap}:${topic}`, () => new TopicView(client, topic, bootstrap))
    });
    panel.title.icon = streamsIcon;
    app.shell.add(panel, 'left', { rank: 650 });
    notebooks.currentChanged.connect(() => void panel.refresh());
    labShell?.currentChanged.connect(() => void panel.refresh());

    app.commands.addCommand(COMMAND_OPEN, {
      label: 'Show the Streams panel (kstream_nb)',
      execute: () => app.shell.activateById(panel.id)
    });
  }
};

/** Keeps `%%kstream` cells on the IPython mode (CodeMirror 6 language follows the cell's mimeType). */
const highlightPlugin: JupyterFrontEndPlugin<void> = {
  id: 'kstream-nb:highlight',
  description: 'Highlights %%kstream cells as Python',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (_app: JupyterFrontEnd, notebooks: INotebookTracker) => {
    const watch = (panel: NotebookPanel) => {
      const notebook = panel.content;
      const overridden = new WeakSet<object>();
      const apply = () => {
        const fallback = notebook.codeMimetype;
        for (const cell of notebook.widgets) {
          if (cell.model.type !== 'code') {
            continue;
          }
          const source = cell.model.sharedModel.getSource();
          const ours = isKstreamCell(source);
          if (!ours && !overridden.has(cell.model)) {
            continue; // not ours to touch
          }
          const wanted = cellMimeType(source, fallback);
          if (cell.model.mimeType !== wanted) {
            cell.model.mimeType = wanted;
          }
          if (ours) {
            overridden.add(cell.model);
          } else {
            overridden.delete(cell.model);
          }
        }
      };
      const models = notebook.model;
      let scheduled = false;
      const schedule = () => {
        if (!scheduled) {
          scheduled = true;
          requestAnimationFrame(() => {
            scheduled = false;
            if (!panel.isDisposed) {
              apply();
            }
          });
        }
      };
      models?.contentChanged.connect(schedule);
      notebook.modelContentChanged.connect(schedule);
      panel.sessionContext.kernelChanged.connect(schedule);
      void panel.revealed.then(schedule);
    };
    notebooks.widgetAdded.connect((_, panel) => watch(panel));
    notebooks.forEach(watch);
  }
};

export default [panelPlugin, highlightPlugin];
