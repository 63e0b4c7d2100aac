// The scanner page's service worker: the page's own files come from the cache, so the page opens
// without the network (a gate whose network went, a reload, a restart); everything else, the service's
// API above all, goes to the network untouched. The build replaces VERSION with a digest of the files,
// so a new release is a new worker: it fetches the new files while the old one still serves, then
// takes over and drops the old cache.
const VERSION = '__VERSION__'
const FILES = ['./', './app.js', './app.css']
const CACHE = `wristband-scanner-${VERSION}`
const paths = new Set(FILES.map((f) => new URL(f, self.location.href).pathname))

self.addEventListener('install', (event) => {
  event.waitUntil(
    caches
      .open(CACHE)
      .then((cache) => cache.addAll(FILES.map((f) => new Request(f, { cache: 'reload' }))))
      .then(() => self.skipWaiting()),
  )
})

self.addEventListener('activate', (event) => {
  event.waitUntil(
    caches
      .keys()
      .then((names) =>
        Promise.all(
          names.filter((n) => n.startsWith('wristband-scanner-') && n !== CACHE).map((n) => caches.delete(n)),
        ),
      )
      .then(() => self.clients.claim()),
  )
})

self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url)
  if (event.request.method !== 'GET' || url.origin !== self.location.origin || !paths.has(url.pathname))
    return
  // The cache first: at a festival gate a network that answers slowly is worse than none.
  event.respondWith(
    caches.match(url.pathname, { cacheName: CACHE }).then((hit) => hit ?? fetch(event.request)),
  )
})
