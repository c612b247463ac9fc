package dev.memoryd.client;

import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.function.Function;
import java.util.stream.Stream;
import java.util.stream.StreamSupport;

/**
 * Every item of a paged listing ({@code MemoryView}, {@code ListViews}), fetched a page at a time
 * as the iteration reaches it: each page is one call (with the client's deadline and retries),
 * following {@code next_page_token} until the server sends an empty one. Each {@link #iterator()}
 * (or {@link #stream()}) starts again from the request's own page token.
 *
 * <pre>{@code
 * for (Memory m : client.memoryViewAll(MemoryViewRequest.newBuilder().setSubject("user-42").build())) {
 *   ...
 * }
 * }</pre>
 *
 * @param <T> the listed item ({@code Memory}, {@code View})
 */
public final class Pages<T> implements Iterable<T> {
  /** One fetched page: its items and the token of the next (empty on the last page). */
  record Page<T>(List<T> items, String nextPageToken) {}

  private final String firstToken;
  private final Function<String, Page<T>> fetch;

  Pages(String firstToken, Function<String, Page<T>> fetch) {
    this.firstToken = firstToken;
    this.fetch = fetch;
  }

  /** The items in the server's order; a failed page fetch throws {@link MemorydException}. */
  @Override
  public Iterator<T> iterator() {
    return new Iterator<>() {
      private Iterator<T> page = List.<T>of().iterator();
      private String token = firstToken;
      private boolean last;

      @Override
      public boolean hasNext() {
        while (!page.hasNext() && !last) {
          Page<T> next = fetch.apply(token);
          if (!next.nextPageToken().isEmpty() && next.nextPageToken().equals(token)) {
            throw new IllegalStateException("the server returned the page token it was sent");
          }
          page = next.items().iterator();
          token = next.nextPageToken();
          last = token.isEmpty();
        }
        return page.hasNext();
      }

      @Override
      public T next() {
        if (!hasNext()) {
          throw new NoSuchElementException();
        }
        return page.next();
      }
    };
  }

  /** The items as a sequential stream, fetched lazily like {@link #iterator()}. */
  public Stream<T> stream() {
    return StreamSupport.stream(spliterator(), false);
  }
}
