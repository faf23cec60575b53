// A page of the portal: its element, and what the poller calls to bring it up to date.
export interface View {
  el: HTMLElement;
  refresh?: () => Promise<void>;
  pollMs?: number;
  dispose?: () => void;
}
