import { useEffect, useRef, useState } from 'preact/hooks';
import { setUnauthorizedListener } from './api';
import { Experiments } from './pages/Experiments';
import { Explain } from './pages/Explain';
import { Keys } from './pages/Keys';
import { Models } from './pages/Models';
import { Overview } from './pages/Overview';
import { Providers } from './pages/Providers';
import { SignIn } from './pages/SignIn';
import { Traces } from './pages/Traces';
import { PAGES, useHashPage, type PageId } from './router';
import { forgetKey, storedKey } from './session';

const VIEWS: Record<PageId, () => preact.JSX.Element> = {
  overview: Overview,
  models: Models,
  providers: Providers,
  experiments: Experiments,
  traces: Traces,
  explain: Explain,
  keys: Keys,
};

export function App() {
  const [signedIn, setSignedIn] = useState(() => storedKey() !== null);
  const [notice, setNotice] = useState<string | undefined>();
  const page = useHashPage();
  useEffect(() => {
    setUnauthorizedListener((e) => {
      setNotice(`Signed out: ${e.message}`);
      setSignedIn(false);
    });
  }, []);
  const firstPage = useRef(true);
  useEffect(() => {
    const title = PAGES.find((p) => p.id === page)?.title ?? '';
    document.title = `${title} · Gateway console`;
    // After a page change, keyboard and screen-reader users continue at the new page's content.
    if (firstPage.current) firstPage.current = false;
    else document.getElementById('main')?.focus();
  }, [page]);
  if (!signedIn) {
    return (
      <SignIn
        notice={notice}
        onSignedIn={() => {
          setNotice(undefined);
          setSignedIn(true);
        }}
      />
    );
  }
  const View = VIEWS[page];
  return (
    <div class="shell">
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), document.getElementById('main')?.focus())}>
        Skip to content
      </a>
      <header class="top">
        <span class="brand">Gateway console</span>
        <nav aria-label="Pages">
          <ul>
            {PAGES.map((p) => (
              <li key={p.id}>
                <a href={`#/${p.id}`} aria-current={p.id === page ? 'page' : undefined}>
                  {p.title}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <button
          type="button"
          class="signout"
          onClick={() => {
            forgetKey();
            setNotice(undefined);
            setSignedIn(false);
          }}
        >
          Sign out
        </button>
      </header>
      <main id="main" tabIndex={-1} data-page={page}>
        <View key={page} />
      </main>
    </div>
  );
}
